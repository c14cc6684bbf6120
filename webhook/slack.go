package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ladderhq/ladder"
)

// SlackDetail is what a Slack approval message shows beyond the event:
// the proposal (the payload a person approves) and the step's figures in
// one sentence. The event itself never carries the payload.
type SlackDetail func(ctx context.Context, ev ladder.Event) (proposal json.RawMessage, figures string)

// Slack posts events to a Slack channel: approval.requested as a Block
// Kit message with Approve and Reject buttons, the others as plain text.
type Slack struct {
	// WebhookURL is an incoming webhook; or Token (a bot token) posts to
	// Channel through APIURL's chat.postMessage.
	WebhookURL     string
	Token, Channel string
	APIURL         string
	Client         *http.Client
	PublicURL      string
	Detail         SlackDetail
}

// Message is the Slack message of ev.
func (s *Slack) Message(ctx context.Context, ev ladder.Event) map[string]any {
	link := s.PublicURL + ev.Data.Link
	msg := map[string]any{"text": ev.Data.Text}
	if ev.Type != ladder.EventApprovalRequested || ev.Data.ApprovalID == "" {
		msg["text"] = fmt.Sprintf("%s <%s|Open in ladder>", ev.Data.Text, link)
		return msg
	}
	var proposal json.RawMessage
	var figures string
	if s.Detail != nil {
		proposal, figures = s.Detail(ctx, ev)
	}
	fields := []map[string]any{mrkdwn("*Capability*\n" + ev.Data.Capability)}
	if ev.Data.Step != "" {
		fields = append(fields, mrkdwn(fmt.Sprintf("*Step*\n%s/%s %s", ev.Data.Queue, ev.Data.Step, ev.Data.Item)))
	}
	if ev.Data.Lane != "" {
		fields = append(fields, mrkdwn("*Lane*\n"+string(ev.Data.Lane)))
	}
	blocks := []map[string]any{
		{"type": "section", "text": mrkdwn("*" + ev.Data.Text + "*")},
		{"type": "section", "fields": fields},
	}
	if figures != "" {
		blocks = append(blocks, map[string]any{"type": "section", "text": mrkdwn("*Figures*\n" + figures)})
	}
	if len(proposal) > 0 {
		var b bytes.Buffer
		_ = json.Indent(&b, proposal, "", "  ")
		text := b.String()
		if len(text) > 2500 {
			text = text[:2500] + "…"
		}
		blocks = append(blocks, map[string]any{"type": "section", "text": mrkdwn("*Proposal*\n```" + text + "```")})
	}
	blocks = append(blocks,
		map[string]any{"type": "actions", "block_id": "ladder_approval", "elements": []map[string]any{
			button("Approve", "approve", "primary", ev.Data.ApprovalID),
			button("Reject", "reject", "danger", ev.Data.ApprovalID),
		}},
		map[string]any{"type": "context", "elements": []map[string]any{mrkdwn(fmt.Sprintf("<%s|Open in ladder> · %s", link, ev.Data.ApprovalID))}},
	)
	msg["blocks"] = blocks
	return msg
}

func mrkdwn(text string) map[string]any { return map[string]any{"type": "mrkdwn", "text": text} }

func button(label, action, style, value string) map[string]any {
	return map[string]any{"type": "button", "text": map[string]any{"type": "plain_text", "text": label}, "action_id": action, "style": style, "value": value}
}

// Send posts ev once.
func (s *Slack) Send(ctx context.Context, ev ladder.Event) (int, error) {
	msg := s.Message(ctx, ev)
	target := s.WebhookURL
	if target == "" {
		target = s.APIURL + "/chat.postMessage"
		msg["channel"] = s.Channel
	}
	status, body, err := s.post(ctx, target, msg)
	if err != nil {
		return status, err
	}
	if s.WebhookURL == "" {
		// The Web API answers 200 with ok false for its errors.
		var r struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &r) != nil || !r.OK {
			return status, fmt.Errorf("slack chat.postMessage: %s", cmpOr(r.Error, "no ok in the answer"))
		}
	}
	return status, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// post sends msg as JSON, with the bot token when there is one.
func (s *Slack) post(ctx context.Context, target string, msg any) (int, []byte, error) {
	b, err := json.Marshal(msg)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	if s.Token != "" && strings.HasPrefix(target, s.APIURL) {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("post to slack: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, body, fmt.Errorf("slack answered HTTP %d", resp.StatusCode)
	}
	return resp.StatusCode, body, nil
}

// VerifySlack checks a request from Slack as Slack documents it: the
// X-Slack-Signature "v0=" + hex HMAC-SHA256, keyed with the signing
// secret, of "v0:" + X-Slack-Request-Timestamp + ":" + body, with the
// timestamp within five minutes of now.
func VerifySlack(secret []byte, timestamp, signature string, body []byte, now time.Time) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return errors.New("X-Slack-Request-Timestamp is not a number")
	}
	if d := now.Sub(time.Unix(ts, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return errors.New("X-Slack-Request-Timestamp is more than five minutes from now")
	}
	got, ok := strings.CutPrefix(signature, "v0=")
	sig, herr := hex.DecodeString(got)
	if !ok || herr != nil || !hmac.Equal(sig, SlackSignature(secret, timestamp, body)) {
		return errors.New("X-Slack-Signature does not match")
	}
	return nil
}

// SlackSignature is the HMAC a Slack request with that timestamp and body
// carries (hex-encoded after "v0=").
func SlackSignature(secret []byte, timestamp string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("v0:" + timestamp + ":"))
	h.Write(body)
	return h.Sum(nil)
}

// SlackWorkspace is what the interactivity endpoint knows of one
// workspace's Slack app.
type SlackWorkspace struct {
	SigningSecret []byte
	// Users maps Slack user ids, Emails lowercase emails, to principals.
	Users, Emails map[string]string
	// Slack looks emails up (users.info) with its bot token, and updates
	// messages through response_url.
	Slack *Slack
}

// Decide records a decision from Slack: approve or reject approval id as
// p, through the same path as the console.
type Decide func(ctx context.Context, p ladder.Principal, id, action string) (ladder.ApprovalView, error)

// SlackInteractions is the Slack interactivity endpoint, POST
// /slack/{workspace}/interactions: it verifies Slack's signature, maps the
// Slack user to a person, decides, and updates the message.
type SlackInteractions struct {
	Workspaces map[string]SlackWorkspace
	Decide     Decide
	Logger     *slog.Logger
	Now        func() time.Time
}

// maxSlackBody bounds an interaction's body; Slack's are a few KiB.
const maxSlackBody = 256 << 10

type slackPayload struct {
	Type string `json:"type"`
	User struct {
		ID       string `json:"id"`
		Username string `json:"username"`
	} `json:"user"`
	ResponseURL string `json:"response_url"`
	Actions     []struct {
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
	} `json:"actions"`
}

func (h *SlackInteractions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, ok := h.Workspaces[r.PathValue("workspace")]
	if r.Method != http.MethodPost || !ok {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSlackBody))
	if err != nil {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	if err := VerifySlack(ws.SigningSecret, r.Header.Get("X-Slack-Request-Timestamp"), r.Header.Get("X-Slack-Signature"), body, now()); err != nil {
		h.Logger.Warn("slack interaction refused", "workspace", r.PathValue("workspace"), "err", err)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	form, err := url.ParseQuery(string(body))
	var p slackPayload
	if err != nil || json.Unmarshal([]byte(form.Get("payload")), &p) != nil || p.Type != "block_actions" || len(p.Actions) != 1 {
		http.Error(w, "not a block action", http.StatusBadRequest)
		return
	}
	act := p.Actions[0]
	if act.ActionID != "approve" && act.ActionID != "reject" {
		http.Error(w, "unknown action", http.StatusBadRequest)
		return
	}
	// Slack wants an answer within 3 s; approving runs the call, so the
	// decision and the message update follow the acknowledgement.
	w.WriteHeader(http.StatusOK)
	ctx := context.WithoutCancel(r.Context())
	go h.act(ctx, r.PathValue("workspace"), ws, p, act.ActionID, act.Value)
}

// act decides and updates the message, or refuses an unmapped user with
// an ephemeral reply.
func (h *SlackInteractions) act(ctx context.Context, workspace string, ws SlackWorkspace, p slackPayload, action, id string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	reply := func(msg map[string]any) {
		if p.ResponseURL == "" {
			return
		}
		if _, _, err := ws.Slack.post(ctx, p.ResponseURL, msg); err != nil {
			h.Logger.Warn("slack reply", "workspace", workspace, "approval_id", id, "err", err)
		}
	}
	principal := ws.Users[p.User.ID]
	if principal == "" && len(ws.Emails) > 0 {
		principal = ws.Emails[strings.ToLower(h.email(ctx, ws, p.User.ID))]
	}
	if principal == "" {
		h.Logger.Warn("slack user not mapped to a person; nothing changed", "workspace", workspace, "slack_user", p.User.ID, "approval_id", id)
		reply(map[string]any{"response_type": "ephemeral", "replace_original": false,
			"text": "You are not set up to decide ladder approvals from Slack, so nothing changed. Ask an operator to add your Slack user to the workspace's slack.users, or decide in the console."})
		return
	}
	pr := ladder.Principal{KeyID: "slack:" + principal, Workspace: workspace, Kind: ladder.KeyHuman}
	v, err := h.Decide(ctx, pr, id, action)
	var text string
	switch {
	case err != nil:
		le := ladder.AsError(err)
		text = fmt.Sprintf("%s could not %s %s: %s", principal, action, id, le.Message)
		reply(map[string]any{"response_type": "ephemeral", "replace_original": false, "text": text})
		return
	case v.Status == ladder.ApprovalRejected:
		text = fmt.Sprintf("Rejected by %s.", principal)
	case v.ExecError != "":
		text = fmt.Sprintf("Approved by %s; the call did not run: %s", principal, v.ExecError)
	default:
		text = fmt.Sprintf("Approved by %s; the call ran.", principal)
	}
	reply(map[string]any{"replace_original": true, "text": fmt.Sprintf("Approval %s of %s: %s", id, v.Capability, text),
		"blocks": []map[string]any{{"type": "section", "text": mrkdwn(fmt.Sprintf("*Approval %s of %s*\n%s", id, v.Capability, text))}}})
}

// email looks a Slack user's email up with the bot token (users.info).
func (h *SlackInteractions) email(ctx context.Context, ws SlackWorkspace, user string) string {
	if ws.Slack == nil || ws.Slack.Token == "" {
		return ""
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ws.Slack.APIURL+"/users.info?user="+url.QueryEscape(user), nil)
	if err != nil {
		return ""
	}
	req.Header.Set("Authorization", "Bearer "+ws.Slack.Token)
	resp, err := ws.Slack.Client.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var r struct {
		OK   bool `json:"ok"`
		User struct {
			Profile struct {
				Email string `json:"email"`
			} `json:"profile"`
		} `json:"user"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&r) != nil || !r.OK {
		return ""
	}
	return r.User.Profile.Email
}

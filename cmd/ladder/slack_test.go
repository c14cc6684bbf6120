package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/webhook"
)

// slackAPI stands in for Slack: chat.postMessage and users.info under
// /api, and response_url under /respond.
type slackAPI struct {
	mu       sync.Mutex
	posted   []map[string]any // chat.postMessage bodies
	auth     []string
	replies  []map[string]any // response_url bodies
	messages chan struct{}
}

func (s *slackAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.URL.Path {
	case "/api/chat.postMessage":
		s.posted, s.auth = append(s.posted, m), append(s.auth, r.Header.Get("Authorization"))
		fmt.Fprint(w, `{"ok":true}`)
	case "/api/users.info":
		email := map[string]string{"U_BOB": "Bob@Example.com"}[r.URL.Query().Get("user")]
		fmt.Fprintf(w, `{"ok":true,"user":{"profile":{"email":%q}}}`, email)
	case "/respond":
		s.replies = append(s.replies, m)
		fmt.Fprint(w, "ok")
	default:
		http.NotFound(w, r)
	}
	select {
	case s.messages <- struct{}{}:
	default:
	}
}

// until waits for cond on the stand-in's state.
func (s *slackAPI) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 30s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// interaction is a block_actions request as Slack sends it, signed with
// secret at ts (Slack's documented v0 algorithm).
func interaction(t *testing.T, srvURL, secret, user, action, id, responseURL string, ts time.Time) *http.Request {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{"type": "block_actions", "user": map[string]any{"id": user},
		"response_url": responseURL, "actions": []map[string]any{{"action_id": action, "value": id}}})
	body := "payload=" + url.QueryEscape(string(payload))
	req, err := http.NewRequest("POST", srvURL+"/slack/ops/interactions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	stamp := strconv.FormatInt(ts.Unix(), 10)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", stamp)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(webhook.SlackSignature([]byte(secret), stamp, []byte(body))))
	return req
}

// TestSlackApproval: an approval request is posted to Slack as a Block Kit
// message with Approve and Reject buttons; a click whose signature fails,
// or by a Slack user no one mapped, changes nothing; two signed clicks by
// a mapped person execute the call once and update the message with who
// decided; a person mapped by email rejects another.
func TestSlackApproval(t *testing.T) {
	api := &slackAPI{messages: make(chan struct{}, 1)}
	slack := httptest.NewServer(api)
	t.Cleanup(slack.Close)
	var upstreamCalls atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamCalls.Add(1)
		fmt.Fprint(w, `{"sent":true}`)
	}))
	t.Cleanup(upstream.Close)
	cfg := `workspaces:
  - id: ops
    queues:
      - id: q
        steps:
          - {id: s1, name: Step one}
    capabilities:
      - id: pay:send
        title: Send a payment
        description: Sends a payment to a partner. A person approves every call first; the call returns an approval id to poll.
        human_gate: true
        payload_schema: {type: object, properties: {ref: {type: string, description: The payment reference.}}}
        executor: {kind: http, url: "` + upstream.URL + `"}
    slack:
      bot_token_env: SLACK_TOKEN
      channel: C0APPROVALS
      signing_secret_env: SLACK_SIGNING
      api_url: ` + slack.URL + `/api
      users:
        - {slack_user: U_ALICE, principal: alice}
        - {email: bob@example.com, principal: bob}
`
	path := filepath.Join(t.TempDir(), "ladder.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	const signing = "8f742231b10e8888abcd99yyyzzz85a5"
	_, admin, _ := ladder.NewKeyToken()
	srv := startServe(t, "a", path, filepath.Join(t.TempDir(), "ladder.db"),
		"LADDER_ADMIN_KEY="+admin, "SLACK_TOKEN=xoxb-test", "SLACK_SIGNING="+signing, "LADDER_AUDIT_SECRET=slack-test")
	agent, human := agentKey(t, srv.URL, admin, "agent"), agentKey(t, srv.URL, admin, "human")

	id := requestApproval(t, srv.URL, agent, "pay-slack-1")
	api.until(t, "chat.postMessage", func() bool { return len(api.posted) == 1 })
	api.mu.Lock()
	msg, auth := api.posted[0], api.auth[0]
	api.mu.Unlock()
	raw, _ := json.Marshal(msg)
	for _, want := range []string{`"channel":"C0APPROVALS"`, `"action_id":"approve"`, `"action_id":"reject"`, `"value":"` + id + `"`, `pay-slack-1`, srv.URL + "/console/approvals/" + id} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the Slack message lacks %s: %s", want, raw)
		}
	}
	if auth != "Bearer xoxb-test" {
		t.Errorf("chat.postMessage Authorization %q", auth)
	}

	status := func(id string) ladder.ApprovalView {
		var v ladder.ApprovalView
		mustCall(t, 200, "GET", srv.URL+"/v1/approvals/"+id, human, nil, &v)
		return v
	}
	respond := slack.URL + "/respond"
	// A bad signature, and a signature too old: refused, nothing changes.
	bad := interaction(t, srv.URL, "not-the-secret", "U_ALICE", "approve", id, respond, time.Now())
	old := interaction(t, srv.URL, signing, "U_ALICE", "approve", id, respond, time.Now().Add(-6*time.Minute))
	for name, req := range map[string]*http.Request{"wrong secret": bad, "six minutes old": old} {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("%s: HTTP %d, want 401", name, resp.StatusCode)
		}
	}
	// Someone nobody mapped: an ephemeral refusal, nothing changes.
	resp, err := http.DefaultClient.Do(interaction(t, srv.URL, signing, "U_EVE", "approve", id, respond, time.Now()))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("unmapped click: %v %v", resp, err)
	}
	resp.Body.Close()
	api.until(t, "the ephemeral refusal", func() bool { return len(api.replies) == 1 })
	api.mu.Lock()
	refusal := api.replies[0]
	api.mu.Unlock()
	if refusal["response_type"] != "ephemeral" || !strings.Contains(fmt.Sprint(refusal["text"]), "nothing changed") {
		t.Errorf("refusal %v", refusal)
	}
	if v := status(id); v.Status != ladder.ApprovalPending || upstreamCalls.Load() != 0 {
		t.Fatalf("after an unmapped click: %s, upstream called %d times", v.Status, upstreamCalls.Load())
	}

	// Alice clicks Approve twice at once: the call runs once.
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.DefaultClient.Do(interaction(t, srv.URL, signing, "U_ALICE", "approve", id, respond, time.Now()))
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("click: %v %v", resp, err)
				return
			}
			resp.Body.Close()
		}()
	}
	wg.Wait()
	api.until(t, "the message update", func() bool {
		for _, r := range api.replies {
			if r["replace_original"] == true {
				return true
			}
		}
		return false
	})
	api.until(t, "both answers", func() bool { return len(api.replies) == 3 })
	v := status(id)
	if v.Status != ladder.ApprovalApproved || v.DecidedBy != "slack:alice" || upstreamCalls.Load() != 1 {
		t.Fatalf("after two approvals: %s by %s, upstream called %d times", v.Status, v.DecidedBy, upstreamCalls.Load())
	}
	api.mu.Lock()
	var update map[string]any
	for _, r := range api.replies[1:] {
		if r["replace_original"] == true {
			update = r
		}
	}
	api.mu.Unlock()
	if text := fmt.Sprint(update["text"]); !strings.Contains(text, "Approved by alice") || !strings.Contains(text, "ran") {
		t.Errorf("message update %q", text)
	}

	// Bob, mapped by his email, rejects another.
	id2 := requestApproval(t, srv.URL, agent, "pay-slack-2")
	resp, err = http.DefaultClient.Do(interaction(t, srv.URL, signing, "U_BOB", "reject", id2, respond, time.Now()))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("bob's click: %v %v", resp, err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(30 * time.Second)
	for status(id2).Status == ladder.ApprovalPending && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if v := status(id2); v.Status != ladder.ApprovalRejected || v.DecidedBy != "slack:bob" || upstreamCalls.Load() != 1 {
		t.Fatalf("bob's rejection: %s by %s", v.Status, v.DecidedBy)
	}
}

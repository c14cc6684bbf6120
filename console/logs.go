package console

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/service"
)

// gateData is the gate history page's data.
type gateData struct {
	Filter ladder.GateHistoryRequest
	Page   ladder.GateHistoryPage
	Next   template.URL // the next page's link
	Error  *ladder.Error
	States []string
	// Cases, Fns and Actions are the filters' choices: the workspace's
	// gate cases, precondition functions and commits.
	Cases, Fns, Actions []choice
}

// choice is one option of a filter's select.
type choice struct {
	Value, Label string
	Selected     bool
}

// gateChoices lists the workspace's gate cases, precondition functions and
// commits as filter choices, the current filter's values selected (and
// kept as a choice even when the config no longer declares them).
func (h *Handler) gateChoices(ws string, f ladder.GateHistoryRequest) (cases, fns, actions []choice) {
	v, err := h.svc.GateFunctions(ws, "")
	if err != nil {
		return nil, nil, nil
	}
	seen := map[string]bool{}
	add := func(list *[]choice, kind, value, label, cur string) {
		if value == "" || seen[kind+value] {
			return
		}
		seen[kind+value] = true
		*list = append(*list, choice{Value: value, Label: label, Selected: value == cur})
	}
	for _, c := range v.Cases {
		add(&cases, "c", c.ID, c.Name+" ("+c.ID+")", f.Case)
		for _, fn := range c.Functions {
			add(&fns, "f", fn.PreconditionFn, fn.PreconditionFn, f.PreconditionFn)
			add(&actions, "a", fn.CommitID, fn.CommitName+" ("+fn.CommitID+")", f.ActionID)
		}
	}
	add(&cases, "c", f.Case, f.Case, f.Case)
	add(&fns, "f", f.PreconditionFn, f.PreconditionFn, f.PreconditionFn)
	add(&actions, "a", f.ActionID, f.ActionID, f.ActionID)
	return cases, fns, actions
}

func (h *Handler) gateHistory(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	q := r.URL.Query()
	f := ladder.GateHistoryRequest{Case: q.Get("case"), PreconditionFn: q.Get("precondition_fn"), ActionID: q.Get("action_id"), GateState: q.Get("gate_state"),
		Since: q.Get("since"), Until: q.Get("until"), Cursor: q.Get("cursor"), Limit: 25}
	d := gateData{Filter: f, States: []string{"PASS", "ESCALATE", "BYPASS_TO_HUMAN"}}
	d.Cases, d.Fns, d.Actions = h.gateChoices(p.Workspace, f)
	status := http.StatusOK
	pg, err := h.svc.GateHistory(r.Context(), p.Workspace, f)
	if err != nil {
		e, shown := filterRefusal(err)
		if !shown {
			return err
		}
		d.Error, status = e, http.StatusBadRequest
	}
	d.Page = pg
	if pg.NextCursor != "" {
		d.Next = nextPage("/console/gate", q, pg.NextCursor)
	}
	h.render(w, r, status, "gate", page{Title: "Gate history", Nav: "gate", Data: d})
	return nil
}

// chainState is what the audit page says of the hash chain.
type chainState struct {
	Verified int64
	Broken   string
}

// verifyChain extends the verified prefix of the hash chains from where
// the last request stopped, so a page costs only the records added since.
// Records of different workspaces may commit out of seq order
// (PostgreSQL), so a record can commit behind the verified prefix; a
// break is walked again from the start once before it is shown.
func (h *Handler) verifyChain(ctx context.Context) chainState {
	h.chainMu.Lock()
	defer h.chainMu.Unlock()
	for attempt := 0; h.chainOK == nil && attempt < 2; attempt++ {
		if h.chain.Count() == 0 || attempt > 0 {
			through, err := h.svc.AuditChainSeq(ctx)
			if err != nil {
				break
			}
			h.chain = ladder.ChainVerifier{GlobalThrough: through}
		}
		err := h.svc.WalkAudit(ctx, h.chain.LastSeq(), h.chain.Check)
		if err == nil || ctx.Err() != nil {
			break
		}
		if attempt > 0 {
			h.chainOK = err
		}
	}
	st := chainState{Verified: h.chain.Count()}
	if h.chainOK != nil {
		st.Broken = h.chainOK.Error()
	}
	return st
}

// auditData is the audit page's data.
type auditData struct {
	Filter  ladder.AuditListRequest
	Records []auditRow
	Next    template.URL
	Chain   chainState
	// Checkpoint is the workspace's latest signed checkpoint and Signer
	// the name of the key that signed it; NoCheckpoint says why there is
	// none.
	Checkpoint   *ladder.AuditCheckpoint
	Signer       string
	NoCheckpoint string
	Error        *ladder.Error
	Kinds        []choice
	Grouped      bool // sign-ins are folded into summary rows
}

type auditRow struct {
	ladder.AuditRecord
	DataText string
	Fields   []shownField
	// Group, when positive, makes the row a summary of that many
	// consecutive sign-ins and sign-outs, from GroupFrom to At.
	Group     int
	GroupFrom time.Time
}

// auditKinds are the record kinds the kind filter offers.
var auditKinds = []string{ladder.AuditRoute, ladder.AuditReview, ladder.AuditApproval, ladder.AuditCall, ladder.AuditCallResult, ladder.AuditGateDecision,
	ladder.AuditLaneChange, ladder.AuditPin, ladder.AuditUnpin, ladder.AuditOutcome, ladder.AuditKeyCreate, ladder.AuditKeyRevoke,
	ladder.AuditSessionStart, ladder.AuditSessionEnd, ladder.AuditHistoryImport, ladder.AuditServerStart, ladder.AuditToolDefinitions, ladder.AuditToolDefinitionChanged}

// isSession says whether a record is a console sign-in or sign-out.
func isSession(kind string) bool {
	return kind == ladder.AuditSessionStart || kind == ladder.AuditSessionEnd
}

// groupSessions folds each run of consecutive sign-ins and sign-outs into
// one summary row, so a busy day of people signing in does not bury what
// they did; the kind filter shows them one by one.
func groupSessions(rows []auditRow) []auditRow {
	out := make([]auditRow, 0, len(rows))
	for i := 0; i < len(rows); {
		j := i
		for j < len(rows) && isSession(rows[j].Kind) {
			j++
		}
		switch {
		case j == i:
			out = append(out, rows[i])
			i++
		case j-i == 1:
			out = append(out, rows[i])
			i = j
		default:
			g := rows[i]
			g.Group, g.GroupFrom = j-i, rows[j-1].At
			out = append(out, g)
			i = j
		}
	}
	return out
}

// auditLog is the audit page: the workspace's records newest first,
// filtered by kind, actor, step, since and until as GET /v1/audit filters
// them, paged by the same cursor.
func (h *Handler) auditLog(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	q := r.URL.Query()
	f := ladder.AuditListRequest{Kind: q.Get("kind"), Actor: q.Get("actor"), Step: q.Get("step"), Since: q.Get("since"), Until: q.Get("until"),
		Cursor: q.Get("cursor"), Limit: 50}
	d := auditData{Filter: f, Grouped: f.Kind == ""}
	for _, k := range auditKinds {
		d.Kinds = append(d.Kinds, choice{Value: k, Label: k, Selected: k == f.Kind})
	}
	if f.Kind != "" && !slices.Contains(auditKinds, f.Kind) {
		d.Kinds = append(d.Kinds, choice{Value: f.Kind, Label: f.Kind, Selected: true})
	}
	status := http.StatusOK
	// Older links named the page by the seq it starts below (?before=N).
	if b := q.Get("before"); b != "" && f.Cursor == "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			d.Error, status = &ladder.Error{Code: ladder.CodeBadCursor, Message: "That page link is not valid.", Hint: "Start again from the newest records."}, http.StatusBadRequest
		} else {
			f.Cursor = service.AuditCursor(n)
		}
	}
	if d.Error == nil {
		pg, err := h.svc.AuditList(r.Context(), p, f)
		if err != nil {
			e, shown := filterRefusal(err)
			if !shown {
				return &ladder.Error{Code: ladder.CodeAuditUnavailable, Message: "The audit log cannot be read right now.", Hint: "Try again shortly.", Err: err}
			}
			d.Error, status = e, http.StatusBadRequest
		}
		for _, rec := range pg.Records {
			d.Records = append(d.Records, auditRow{AuditRecord: rec, DataText: string(rec.Data), Fields: auditFields(rec.Data)})
		}
		if d.Grouped {
			d.Records = groupSessions(d.Records)
		}
		if pg.NextCursor != "" {
			d.Next = nextPage("/console/audit", q, pg.NextCursor, "before")
		}
	}
	d.Chain = h.verifyChain(r.Context())
	if cp, err := h.svc.AuditCheckpoint(r.Context(), p); err != nil {
		e := ladder.AsError(err).Render(ladder.SurfaceConsole)
		d.NoCheckpoint = e.Message
		if e.Code != ladder.CodeNotFound {
			h.log.WarnContext(r.Context(), "console: audit checkpoint", "err", err)
			d.NoCheckpoint = "The latest signed checkpoint cannot be read right now."
		}
	} else {
		d.Checkpoint, d.Signer = &cp, noteSigner(cp.Note)
	}
	h.render(w, r, status, "audit", page{Title: "Audit log", Nav: "audit", Data: d})
	return nil
}

// noteSigner returns the name of the key whose signature a signed note
// carries first: its signature lines read "— NAME SIGNATURE".
func noteSigner(note string) string {
	for line := range strings.Lines(note) {
		if rest, ok := strings.CutPrefix(line, "\u2014 "); ok {
			name, _, _ := strings.Cut(rest, " ")
			return name
		}
	}
	return ""
}

// auditProof serves a record's inclusion proof in the workspace's latest
// signed checkpoint (GET /v1/audit/records/{seq}/proof's JSON) as a file
// to download, for the person to check or keep. A record of another
// workspace is not found, as one that does not exist.
func (h *Handler) auditProof(w http.ResponseWriter, r *http.Request) error {
	seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
	if err != nil || seq <= 0 {
		return errNotFound
	}
	proof, err := h.svc.AuditProof(r.Context(), principalOf(r), seq)
	if err != nil {
		return err
	}
	body, err := json.MarshalIndent(proof, "", "  ")
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="ladder-proof-%s-%d.json"`, proof.Checkpoint.Workspace, seq))
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, err = w.Write(append(body, '\n'))
	return err
}

// filterRefusal is a list page's answer to err: a bad filter or page link
// is shown on the page (400, in the console's words); anything else is
// the request's error.
func filterRefusal(err error) (*ladder.Error, bool) {
	e := ladder.AsError(err).Render(ladder.SurfaceConsole)
	return e, e.Code == ladder.CodeInvalidArgument || e.Code == ladder.CodeBadCursor
}

// nextPage is the link to a list page's next page: the same query with
// the cursor the page ended on (and any other position dropped).
func nextPage(path string, q url.Values, cursor string, drop ...string) template.URL {
	nq := url.Values{}
	for k, v := range q {
		nq[k] = v
	}
	for _, k := range drop {
		nq.Del(k)
	}
	nq.Set("cursor", cursor)
	return template.URL(path + "?" + nq.Encode())
}

package console

import (
	"context"
	"html/template"
	"net/http"
	"net/url"
	"strconv"

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
}

func (h *Handler) gateHistory(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	q := r.URL.Query()
	f := ladder.GateHistoryRequest{Case: q.Get("case"), PreconditionFn: q.Get("precondition_fn"), ActionID: q.Get("action_id"), GateState: q.Get("gate_state"),
		Since: q.Get("since"), Until: q.Get("until"), Cursor: q.Get("cursor"), Limit: 25}
	d := gateData{Filter: f, States: []string{"PASS", "ESCALATE", "BYPASS_TO_HUMAN"}}
	status := http.StatusOK
	pg, err := h.svc.GateHistory(r.Context(), p.Workspace, f)
	if err != nil {
		e := ladder.AsError(err).Render(ladder.SurfaceConsole)
		if e.Code != ladder.CodeInvalidArgument && e.Code != ladder.CodeBadCursor {
			return err
		}
		d.Error, status = e, http.StatusBadRequest
	}
	d.Page = pg
	if pg.NextCursor != "" {
		nq := url.Values{}
		for k, v := range q {
			nq[k] = v
		}
		nq.Set("cursor", pg.NextCursor)
		d.Next = template.URL("/console/gate?" + nq.Encode())
	}
	h.render(w, r, status, "gate", page{Title: "Gate history", Nav: "gate", Data: d})
	return nil
}

// chainState is what the audit page says of the hash chain.
type chainState struct {
	Verified int64
	Broken   string
}

// verifyChain extends the verified prefix of the hash chain from where the
// last request stopped, so a page costs only the records added since.
func (h *Handler) verifyChain(ctx context.Context) chainState {
	h.chainMu.Lock()
	defer h.chainMu.Unlock()
	if h.chainOK == nil {
		after := h.chain.Count()
		err := h.svc.WalkAudit(ctx, after, h.chain.Check)
		if err != nil && ctx.Err() == nil {
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
	Error   *ladder.Error
}

type auditRow struct {
	ladder.AuditRecord
	DataText string
}

// auditLog is the audit page: the workspace's records newest first,
// filtered by kind, actor, step, since and until as GET /v1/audit filters
// them, paged by the same cursor.
func (h *Handler) auditLog(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	q := r.URL.Query()
	f := ladder.AuditListRequest{Kind: q.Get("kind"), Actor: q.Get("actor"), Step: q.Get("step"), Since: q.Get("since"), Until: q.Get("until"),
		Cursor: q.Get("cursor"), Limit: 50}
	d := auditData{Filter: f}
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
			e := ladder.AsError(err).Render(ladder.SurfaceConsole)
			if e.Code != ladder.CodeInvalidArgument && e.Code != ladder.CodeBadCursor {
				return &ladder.Error{Code: ladder.CodeAuditUnavailable, Message: "The audit log cannot be read right now.", Hint: "Try again shortly.", Err: err}
			}
			d.Error, status = e, http.StatusBadRequest
		}
		for _, rec := range pg.Records {
			d.Records = append(d.Records, auditRow{AuditRecord: rec, DataText: string(rec.Data)})
		}
		if pg.NextCursor != "" {
			nq := url.Values{}
			for k, v := range q {
				nq[k] = v
			}
			nq.Del("before")
			nq.Set("cursor", pg.NextCursor)
			d.Next = template.URL("/console/audit?" + nq.Encode())
		}
	}
	d.Chain = h.verifyChain(r.Context())
	h.render(w, r, status, "audit", page{Title: "Audit log", Nav: "audit", Data: d})
	return nil
}

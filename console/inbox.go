package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/service"
)

// Inbox item kinds.
const (
	itemApproval = "approval"
	itemAudit    = "audit"
	itemShadow   = "shadow"
)

// stepBrief is what an inbox item shows of its step: lane and current figures.
type stepBrief struct {
	Queue, Step, Name string
	Lane              ladder.Lane
	Pinned            bool
	Rolling4          windowView
	AuditRate         float64
	Why               string
}

// item is one inbox entry.
type item struct {
	Kind     string
	At       time.Time
	Approval *ladder.ApprovalView
	Route    *ladder.Route
	Step     *stepBrief
	Gate     *ladder.GateResult
	Proposal string // the agent's proposal, indented JSON
	// Name is the business item (BILL-777), Fields the agent's output as
	// a person reads it, and Say what the person is asked to do.
	Name     string
	Fields   []shownField
	Say      string
	Reviewed *ladder.Review
	// Lanes are a step-tied approval's lane when proposed and now.
	Lanes ladder.StepLanes
}

// ID is the item's id (approval or route).
func (it item) ID() string {
	if it.Approval != nil {
		return it.Approval.ID
	}
	return it.Route.ID
}

// RouteID is the route an audit or shadow review is recorded on.
func (it item) RouteID() string {
	if it.Route != nil {
		return it.Route.ID
	}
	if it.Approval != nil {
		return it.Approval.RouteID
	}
	return ""
}

// lookups caches per-request reads shared by several items.
type lookups struct {
	h        *Handler
	ctx      context.Context
	ws       string
	briefs   map[string]*stepBrief
	reviewed map[string]map[string]ladder.Review // step key → route id → review
}

func (h *Handler) lookups(r *http.Request) *lookups {
	return &lookups{h: h, ctx: r.Context(), ws: principalOf(r).Workspace, briefs: map[string]*stepBrief{}, reviewed: map[string]map[string]ladder.Review{}}
}

func (l *lookups) brief(queue, step string) *stepBrief {
	k := queue + "/" + step
	if b, ok := l.briefs[k]; ok {
		return b
	}
	var b *stepBrief
	if ev, err := l.h.svc.Evidence(l.ctx, l.ws, queue, step); err == nil {
		b = &stepBrief{Queue: ev.Queue, Step: ev.Step, Name: ev.Name, Lane: ev.Lane, Pinned: ev.Pinned, Rolling4: newWindowView(ev.Figures.Rolling4), AuditRate: ev.AuditRate, Why: ev.Why}
	}
	l.briefs[k] = b
	return b
}

// review returns the first review of a route, if any.
func (l *lookups) review(queue, step, routeID string) (ladder.Review, bool) {
	k := queue + "/" + step
	m, ok := l.reviewed[k]
	if !ok {
		m = map[string]ladder.Review{}
		rows, err := l.h.svc.StepReviews(l.ctx, ladder.Principal{Workspace: l.ws}, queue, step, 1000)
		if err == nil {
			for _, rv := range rows {
				if old, ok := m[rv.RouteID]; !ok || rv.At.Before(old.At) {
					m[rv.RouteID] = rv
				}
			}
		}
		l.reviewed[k] = m
	}
	rv, ok := m[routeID]
	return rv, ok
}

// gateFor finds the gate decision an approval was held by.
func (l *lookups) gateFor(a ladder.Approval) *ladder.GateResult {
	if a.GateDecisionID == "" {
		return nil
	}
	req := ladder.GateHistoryRequest{Since: a.CreatedAt.Add(-5 * time.Minute).Format(time.RFC3339Nano), Until: a.CreatedAt.Add(time.Minute).Format(time.RFC3339Nano), Limit: 100}
	pg, err := l.h.svc.GateHistory(l.ctx, l.ws, req)
	if err != nil {
		return nil
	}
	for i := range pg.Decisions {
		if pg.Decisions[i].DecisionID == a.GateDecisionID {
			return &pg.Decisions[i]
		}
	}
	return nil
}

func indentJSON(raw json.RawMessage) string {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

func (l *lookups) approvalItem(a ladder.ApprovalView) item {
	it := item{Kind: itemApproval, At: a.CreatedAt, Approval: &a, Proposal: indentJSON(a.Payload), Fields: objectFields(a.Payload)}
	if a.Status == ladder.ApprovalShadow {
		it.Kind = itemShadow
	}
	if a.Step != "" {
		it.Step = l.brief(a.Queue, a.Step)
	}
	it.Gate = l.gateFor(a.Approval)
	c, _ := l.h.svc.FindCapability(l.ws, a.Capability)
	it.Name = businessItem(a.Approval, c)
	it.Say = approvalSay(a, c, it.Step, it.Name)
	return it
}

// routeItem is an inbox item of a sampled audit (or of a route a person
// reviews from its page).
func (l *lookups) routeItem(kind string, rt *ladder.Route) item {
	it := item{Kind: kind, At: rt.At, Route: rt, Step: l.brief(rt.Queue, rt.Step), Proposal: indentJSON(rt.Features), Fields: objectFields(rt.Features), Name: rt.Item}
	name := rt.Step
	if it.Step != nil {
		name = it.Step.Name
	}
	if kind == itemAudit {
		it.Say = fmt.Sprintf("The agent handled %s alone (%s runs in auto), and this item was drawn for audit. Check what it did against the item in your system, then say whether you agree; your verdict counts toward the step's accuracy.", rt.Item, name)
	} else {
		it.Say = fmt.Sprintf("%s is in %s, so a person handles %s. Say whether the agent's output below matches what was done; your verdict counts toward the step's accuracy.", name, strings.ReplaceAll(string(rt.Lane), "_", " "), rt.Item)
	}
	return it
}

// approvalSay tells the person deciding what is asked of them; the stored
// reason speaks to the agent that asked.
func approvalSay(a ladder.ApprovalView, c ladder.Capability, st *stepBrief, name string) string {
	what := c.Title
	if what == "" {
		what = a.Capability
	}
	if name != "" {
		what += " for " + name
	}
	step := a.Step
	if st != nil {
		step = st.Name
	}
	switch {
	case a.Status == ladder.ApprovalShadow:
		return fmt.Sprintf("%s is in shadow: the agent may not act yet, so a person handles %s as usual. Compare the agent's proposal below with what you did (or would do) and say whether you agree; nothing ran, and your verdict is the evidence that lets the step move up.", step, orThis(name))
	case a.Kind == ladder.ApprovalHumanGate:
		return fmt.Sprintf("%s: a person approves every call of this kind. Nothing has run; approving runs it once, as shown or as you edit it.", what)
	case a.Kind == ladder.ApprovalProposal:
		return fmt.Sprintf("%s: %s is in propose, so the agent asks before it acts. Nothing has run; approving runs it once, as shown or as you edit it.", what, step)
	}
	return a.Reason
}

func orThis(name string) string {
	if name == "" {
		return "this item"
	}
	return name
}

// inboxData is the inbox page's data: one page of items, newest first,
// and the links to the newest and the next page.
type inboxData struct {
	Items  []item
	Newest bool   // this is not the first page
	Next   string // the next page's URL, if any
}

// inboxItems lists one page of what waits for a person, newest first:
// pending approvals, shadow proposals and sampled audits not reviewed yet.
func (h *Handler) inboxItems(r *http.Request) (inboxData, error) {
	p := principalOf(r)
	cursor := r.URL.Query().Get("cursor")
	pg, err := h.svc.Inbox(r.Context(), p, cursor, service.DefaultInboxPage)
	if err != nil {
		return inboxData{}, err
	}
	l := h.lookups(r)
	d := inboxData{Items: make([]item, 0, len(pg.Items)), Newest: cursor != ""}
	for _, in := range pg.Items {
		switch {
		case in.Approval != nil:
			it := l.approvalItem(*in.Approval)
			it.Lanes = in.Lanes
			d.Items = append(d.Items, it)
		case in.Route != nil:
			d.Items = append(d.Items, l.routeItem(itemAudit, in.Route))
		}
	}
	if pg.NextCursor != "" {
		d.Next = "/console/inbox?cursor=" + url.QueryEscape(pg.NextCursor)
	}
	return d, nil
}

func (h *Handler) inbox(w http.ResponseWriter, r *http.Request) error {
	d, err := h.inboxItems(r)
	if err != nil {
		return err
	}
	h.render(w, r, http.StatusOK, "inbox", page{Title: "Inbox", Nav: "inbox", Data: d})
	return nil
}

// field is one payload field of the edit form.
type field struct {
	Name, Type, Description, Value, Error string
	Required                              bool
}

// approvalData is the approval page's data.
type approvalData struct {
	Item       item
	Capability ladder.Capability
	Fields     []field
	Editable   bool
	FormError  string // an error not tied to one field
	Reason     string
	ReasonErr  string
}

func (h *Handler) approvalPage(w http.ResponseWriter, r *http.Request) error {
	return h.showApproval(w, r, http.StatusOK, nil, "", "")
}

// showApproval renders an approval with the edit form; fieldErrs and the
// reason error sit beside their controls.
func (h *Handler) showApproval(w http.ResponseWriter, r *http.Request, status int, fields []field, formErr, reasonErr string) error {
	p := principalOf(r)
	a, err := h.svc.ApprovalStatus(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	l := h.lookups(r)
	d := approvalData{Item: l.approvalItem(a), FormError: formErr, ReasonErr: reasonErr, Reason: r.PostFormValue("reason")}
	if a.Kind == ladder.ApprovalShadowRec && a.RouteID != "" {
		if rv, ok := l.review(a.Queue, a.Step, a.RouteID); ok {
			d.Item.Reviewed = &rv
		}
	}
	c, ok := h.svc.FindCapability(p.Workspace, a.Capability)
	d.Capability = c
	d.Editable = ok && a.Status == ladder.ApprovalPending
	if d.Editable {
		if d.Item.Lanes, err = h.svc.ApprovalLanes(r.Context(), p, a.Approval); err != nil {
			return err
		}
	}
	if fields == nil {
		src := a.Payload
		if len(a.EditedPayload) > 0 {
			src = a.EditedPayload
		}
		fields = formFields(c, src)
	}
	d.Fields = fields
	h.render(w, r, status, "approval", page{Title: "Approval " + a.ID, Nav: "inbox", Data: d})
	return nil
}

// schemaProps returns the capability's payload properties, sorted with the
// required ones first.
func schemaProps(c ladder.Capability) ([]string, map[string]map[string]any, map[string]bool) {
	props, _ := c.Payload["properties"].(map[string]any)
	req := map[string]bool{}
	if rs, ok := c.Payload["required"].([]any); ok {
		for _, x := range rs {
			if s, ok := x.(string); ok {
				req[s] = true
			}
		}
	}
	out := map[string]map[string]any{}
	var names []string
	for n, v := range props {
		m, _ := v.(map[string]any)
		out[n] = m
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if req[names[i]] != req[names[j]] {
			return req[names[i]]
		}
		return names[i] < names[j]
	})
	return names, out, req
}

// formFields lays a payload out as the edit form's fields.
func formFields(c ladder.Capability, payload json.RawMessage) []field {
	var vals map[string]json.RawMessage
	_ = json.Unmarshal(payload, &vals)
	names, props, req := schemaProps(c)
	var out []field
	for _, n := range names {
		f := field{Name: n, Required: req[n]}
		f.Type, _ = props[n]["type"].(string)
		f.Description, _ = props[n]["description"].(string)
		if raw, ok := vals[n]; ok {
			var s string
			if f.Type == "string" && json.Unmarshal(raw, &s) == nil {
				f.Value = s
			} else if f.Type == "object" || f.Type == "array" || f.Type == "" {
				f.Value = indentJSON(raw)
			} else {
				f.Value = string(raw)
			}
		}
		out = append(out, f)
	}
	return out
}

// payloadFromForm builds the edited payload from the form, keeping fields
// the schema does not list as they were. It fills field errors for values
// that cannot be read at all; the schema check comes after.
func payloadFromForm(c ladder.Capability, orig json.RawMessage, r *http.Request) (map[string]any, []field, bool) {
	pl := map[string]any{}
	_ = json.Unmarshal(orig, &pl)
	names, props, req := schemaProps(c)
	ok := true
	var fields []field
	for _, n := range names {
		f := field{Name: n, Required: req[n], Value: r.PostFormValue("f." + n)}
		f.Type, _ = props[n]["type"].(string)
		f.Description, _ = props[n]["description"].(string)
		v := strings.TrimSpace(f.Value)
		delete(pl, n)
		switch {
		case v == "":
		case f.Type == "string":
			pl[n] = f.Value
		case f.Type == "number" || f.Type == "integer":
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				f.Error, ok = "Enter a number, such as 1250.00.", false
			} else {
				pl[n] = x
			}
		case f.Type == "boolean":
			b, err := strconv.ParseBool(v)
			if err != nil {
				f.Error, ok = "Enter true or false.", false
			} else {
				pl[n] = b
			}
		default:
			var x any
			if err := json.Unmarshal([]byte(v), &x); err != nil {
				f.Error, ok = "Enter valid JSON.", false
			} else {
				pl[n] = x
			}
		}
		fields = append(fields, f)
	}
	return pl, fields, ok
}

func (h *Handler) approve(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	id := r.PathValue("id")
	req := ladder.DecideRequest{Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	if r.PostFormValue("mode") == "edited" {
		a, err := h.svc.ApprovalStatus(r.Context(), p, id)
		if err != nil {
			return err
		}
		c, _ := h.svc.FindCapability(p.Workspace, a.Capability)
		pl, fields, ok := payloadFromForm(c, a.Payload, r)
		if !ok {
			return h.showApproval(w, r, http.StatusUnprocessableEntity, fields, "Some fields need fixing; nothing was approved.", "")
		}
		if err := h.svc.ValidatePayload(p.Workspace, c, pl); err != nil {
			e := ladder.AsError(err).Render(ladder.SurfaceConsole)
			name, _ := e.Data["field"].(string)
			name = strings.TrimPrefix(name, "payload.")
			placed := false
			for i := range fields {
				if fields[i].Name == name {
					fields[i].Error, placed = e.Message, true
				}
			}
			msg := "Some fields need fixing; nothing was approved."
			if !placed {
				msg = e.Message
			}
			return h.showApproval(w, r, http.StatusUnprocessableEntity, fields, msg, "")
		}
		req.Payload, _ = json.Marshal(pl)
	}
	v, err := h.svc.Approve(r.Context(), p, id, req)
	if err != nil {
		if v.ID != "" {
			http.Redirect(w, r, "/console/approvals/"+v.ID+"?done=approved-failed", http.StatusSeeOther)
			return nil
		}
		e := ladder.AsError(err).Render(ladder.SurfaceConsole)
		if e.Code == ladder.CodeInvalidArgument {
			return h.showApproval(w, r, http.StatusUnprocessableEntity, nil, e.Message, "")
		}
		return err
	}
	http.Redirect(w, r, "/console/inbox?done=approved", http.StatusSeeOther)
	return nil
}

func (h *Handler) reject(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	_, err := h.svc.Reject(r.Context(), p, r.PathValue("id"), ladder.DecideRequest{Reason: strings.TrimSpace(r.PostFormValue("reason"))})
	if err != nil {
		e := ladder.AsError(err).Render(ladder.SurfaceConsole)
		if f, _ := e.Data["field"].(string); f == "reason" {
			return h.showApproval(w, r, http.StatusUnprocessableEntity, nil, "", "Say why you reject it; the agent and the audit log see the reason.")
		}
		return err
	}
	http.Redirect(w, r, "/console/inbox?done=rejected", http.StatusSeeOther)
	return nil
}

// routeView is the route page's data.
type routeView struct {
	Item     item
	Errors   map[string]string
	Form     map[string]string
	Reviewed *ladder.Review
	// Calls are the capability calls that ran for the route's item: a
	// route is decided once per item and lane, so a second call for the
	// same item (with another payload, say) runs under the same route, and
	// the person auditing must see every one. CallsCapped says the search
	// stopped before the route's time.
	Calls       []routeCall
	CallsCapped bool
}

// routeCall is one capability call made under a route.
type routeCall struct {
	ID, Capability string
	At             time.Time
	Fields         []shownField
}

// routeCallScan bounds the capability-call records the route page reads to
// find a route's calls (newest first, back to the route's time).
const routeCallScan = 1000

// routeCalls finds the capability calls made under route rt in the audit
// log: the calls recorded since the route, newest first, up to
// routeCallScan records.
func (h *Handler) routeCalls(r *http.Request, rt ladder.Route) ([]routeCall, bool) {
	p := principalOf(r)
	req := ladder.AuditListRequest{Kind: ladder.AuditCall, Since: rt.At.UTC().Format(time.RFC3339Nano), Limit: 500}
	var out []routeCall
	for read := 0; read < routeCallScan; {
		pg, err := h.svc.AuditList(r.Context(), p, req)
		if err != nil {
			return out, true
		}
		read += len(pg.Records)
		for _, rec := range pg.Records {
			var d struct {
				Capability string          `json:"capability"`
				RouteID    string          `json:"route_id"`
				Payload    json.RawMessage `json:"payload"`
			}
			if json.Unmarshal(rec.Data, &d) == nil && d.RouteID == rt.ID {
				out = append(out, routeCall{ID: rec.Subject, Capability: d.Capability, At: rec.At, Fields: objectFields(d.Payload)})
			}
		}
		if pg.NextCursor == "" {
			return out, false
		}
		req.Cursor = pg.NextCursor
	}
	return out, true
}

func (h *Handler) routePage(w http.ResponseWriter, r *http.Request) error {
	return h.showRoute(w, r, http.StatusOK, nil)
}

func (h *Handler) showRoute(w http.ResponseWriter, r *http.Request, status int, errs map[string]string) error {
	p := principalOf(r)
	rt, err := h.svc.GetRoute(r.Context(), p, r.PathValue("id"))
	if ladder.ErrorCode(err) == ladder.CodeRouteNotFound {
		return errNotFound
	}
	if err != nil {
		return err
	}
	l := h.lookups(r)
	kind := itemShadow
	if rt.Audit || rt.Lane == ladder.LaneAuto {
		kind = itemAudit
	}
	it := l.routeItem(kind, &rt)
	v := routeView{Item: it, Errors: errs, Form: map[string]string{}}
	for _, k := range []string{"verdict", "severity", "correction", "note"} {
		v.Form[k] = r.PostFormValue(k)
	}
	if rv, ok := l.review(rt.Queue, rt.Step, rt.ID); ok {
		v.Reviewed = &rv
	}
	v.Calls, v.CallsCapped = h.routeCalls(r, rt)
	h.render(w, r, status, "route", page{Title: "Review " + rt.Item, Nav: "inbox", Data: v})
	return nil
}

func (h *Handler) review(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	req := ladder.ReviewRequest{Verdict: r.PostFormValue("verdict"), Note: strings.TrimSpace(r.PostFormValue("note"))}
	errs := map[string]string{}
	if s := r.PostFormValue("severity"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			errs["severity"] = "Choose 1, 2 or 3."
		}
		req.Severity = n
	}
	if c := strings.TrimSpace(r.PostFormValue("correction")); c != "" {
		if json.Valid([]byte(c)) {
			req.Correction = json.RawMessage(c)
		} else {
			req.Correction, _ = json.Marshal(c)
		}
	}
	if req.Verdict == "" {
		errs["verdict"] = "Choose agree or disagree."
	}
	if len(errs) > 0 {
		return h.showRoute(w, r, http.StatusUnprocessableEntity, errs)
	}
	if _, err := h.svc.Review(r.Context(), p, r.PathValue("id"), req); err != nil {
		e := ladder.AsError(err).Render(ladder.SurfaceConsole)
		if e.Code == ladder.CodeInvalidArgument {
			f, _ := e.Data["field"].(string)
			if f == "" {
				f = "verdict"
			}
			return h.showRoute(w, r, http.StatusUnprocessableEntity, map[string]string{f: e.Message})
		}
		return err
	}
	http.Redirect(w, r, "/console/inbox?done=reviewed", http.StatusSeeOther)
	return nil
}

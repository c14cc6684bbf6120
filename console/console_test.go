package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/service"
)

func TestSignin(t *testing.T) {
	e := seeded(t)
	c := newClient(t, e)

	// Signed out: pages send to the sign-in form, actions are refused.
	r := c.get("/console/inbox")
	if r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Location, "/console/signin") {
		t.Fatalf("signed-out inbox: %d %s", r.Status, r.Location)
	}
	if r := c.post("/console/approvals/ap_x/approve", url.Values{"csrf": {"x"}}); r.Status != http.StatusUnauthorized {
		t.Errorf("signed-out approve: %d", r.Status)
	}
	if r := c.get("/console/"); r.Status != http.StatusSeeOther || r.Location != "/console/signin" {
		t.Errorf("/console/: %d %s", r.Status, r.Location)
	}

	// The sign-in form needs its CSRF token.
	if r := c.post("/console/signin", url.Values{"key": {e.Keys[ws+"/human"]}}); r.Status != http.StatusForbidden {
		t.Errorf("sign-in without csrf: %d", r.Status)
	}
	for _, tc := range []struct {
		name, key string
		status    int
		says      string
	}{
		{"agent key", e.Keys[ws+"/agent"], http.StatusForbidden, "Only a human key can sign in"},
		{"admin key", e.Keys[ws+"/admin"], http.StatusForbidden, "Only a human key can sign in"},
		{"wrong key", "ldr_nosuchkey_abcdefghijklmnopqrstuvwxyz", http.StatusUnauthorized, "That key is not valid."},
		{"empty", "", http.StatusUnauthorized, "That key is not valid."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.signin(tc.key)
			if r.Status != tc.status || !strings.Contains(r.Body, tc.says) {
				t.Errorf("got %d, want %d with %q: %.400s", r.Status, tc.status, tc.says, r.Body)
			}
			if strings.Contains(r.Header.Get("Set-Cookie"), "ladder_console=") {
				t.Error("a session cookie was set")
			}
		})
	}

	// A human key signs in; the cookie is HttpOnly and SameSite=Strict.
	r = c.signin(e.Keys[ws+"/human"])
	if r.Status != http.StatusSeeOther || r.Location != "/console/inbox" {
		t.Fatalf("sign in: %d %s", r.Status, r.Location)
	}
	var sc string
	for _, v := range r.Header.Values("Set-Cookie") {
		if strings.HasPrefix(v, "ladder_console=") {
			sc = v
		}
	}
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/console/"} {
		if !strings.Contains(sc, want) {
			t.Errorf("session cookie %q lacks %s", sc, want)
		}
	}
	if strings.Contains(sc, "ldr_") {
		t.Error("the session cookie carries the key token")
	}
	if r := c.get("/console/inbox"); r.Status != http.StatusOK {
		t.Fatalf("inbox: %d", r.Status)
	}

	// Sign out ends the session.
	if r := c.action("/console/inbox", "/console/signout", nil); r.Status != http.StatusSeeOther {
		t.Fatalf("sign out: %d", r.Status)
	}
	if r := c.get("/console/inbox"); r.Status != http.StatusSeeOther {
		t.Errorf("inbox after sign out: %d", r.Status)
	}

	// Sign-in and sign-out are in the audit log under the key id.
	keyID := ladder.KeyID(e.Keys[ws+"/human"])
	for _, kind := range []string{"console.signin", "console.signout"} {
		recs, err := e.Store.ListAudit(context.Background(), ladder.AuditQuery{Workspace: ws, Kind: kind})
		if err != nil || len(recs) != 1 || recs[0].Actor != keyID {
			t.Errorf("%s records: %v %+v", kind, err, recs)
		}
	}
}

func TestRevokedKeyEndsSession(t *testing.T) {
	e := seeded(t)
	c := signedIn(t, e, ws)
	id := ladder.KeyID(e.Keys[ws+"/human"])
	if _, err := e.Svc.RevokeKey(context.Background(), "test", service.AllWorkspaces, id); err != nil {
		t.Fatal(err)
	}
	if r := c.get("/console/steps"); r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Location, "/console/signin") {
		t.Errorf("after revoke: %d %s", r.Status, r.Location)
	}
}

func TestCSRFRejected(t *testing.T) {
	e := seeded(t)
	ap := requestApproval(t, e, "B-1")
	c := signedIn(t, e, ws)
	for _, tok := range []string{"", "forged"} {
		r := c.post("/console/approvals/"+ap+"/approve", url.Values{"csrf": {tok}, "mode": {"as-proposed"}})
		if r.Status != http.StatusForbidden || !strings.Contains(r.Body, "nothing was done") {
			t.Errorf("csrf %q: %d", tok, r.Status)
		}
	}
	// A token of another session does not work either.
	other := signedIn(t, e, ws)
	tok := other.csrf("/console/inbox")
	if r := c.post("/console/approvals/"+ap+"/approve", url.Values{"csrf": {tok}}); r.Status != http.StatusForbidden {
		t.Errorf("other session's token: %d", r.Status)
	}
	if r := c.post("/console/steps/bills/read_bill/pin", url.Values{"csrf": {"x"}, "lane": {"human_only"}, "reason": {"r"}}); r.Status != http.StatusForbidden {
		t.Errorf("pin with bad csrf: %d", r.Status)
	}
	v := e.Do("GET", "/v1/approvals/"+ap, e.Keys[ws+"/human"], nil)
	if v.Body["status"] != "pending" {
		t.Errorf("approval %v after forged posts", v.Body["status"])
	}
}

func TestInboxApproveEditReject(t *testing.T) {
	e := seeded(t)
	first := requestApproval(t, e, "B-1")
	e.Clock.Advance(1e9)
	second := requestApproval(t, e, "B-2")
	e.Clock.Advance(1e9)
	third := requestApproval(t, e, "B-3")
	e.Clock.Advance(1e9)
	audit := sampledAudit(t, e, "BILL-A")
	c := signedIn(t, e, ws)
	keyID := ladder.KeyID(e.Keys[ws+"/human"])

	in := c.get("/console/inbox")
	contains(t, in.Body, first, second, third, audit, "Rate check", "The agent's proposal", "Wilson 95%", "&#34;bill_id&#34;: &#34;B-1&#34;")
	// Newest first.
	if !(strings.Index(in.Body, audit) < strings.Index(in.Body, third) && strings.Index(in.Body, third) < strings.Index(in.Body, first)) {
		t.Error("the inbox is not newest first")
	}

	// Approve as proposed, exactly once.
	r := c.action("/console/inbox", "/console/approvals/"+first+"/approve", url.Values{"mode": {"as-proposed"}})
	if r.Status != http.StatusSeeOther || r.Location != "/console/inbox?done=approved" {
		t.Fatalf("approve: %d %s %.500s", r.Status, r.Location, r.Body)
	}
	r = c.action("/console/inbox", "/console/approvals/"+first+"/approve", url.Values{"mode": {"as-proposed"}})
	if r.Status != http.StatusConflict || !strings.Contains(r.Body, "decided already") {
		t.Errorf("second approve: %d %.400s", r.Status, r.Body)
	}
	if v := e.Do("GET", "/v1/approvals/"+first, e.Keys[ws+"/human"], nil); v.Body["status"] != "approved" || v.Body["decided_by"] != keyID {
		t.Errorf("approved: %v by %v", v.Body["status"], v.Body["decided_by"])
	}

	// Edit, then approve: a value that is not a number, then one the
	// schema refuses, each shown beside its field; then a good edit.
	page := "/console/approvals/" + second
	contains(t, c.get(page).Body, `id="f-linehaul_usd"`, `value="1850"`, "Edit, then approve")
	r = c.action(page, page+"/approve", url.Values{"mode": {"edited"}, "f.bill_id": {"B-2"}, "f.linehaul_usd": {"lots"}, "f.fuel_surcharge_usd": {"212.5"}})
	if r.Status != http.StatusUnprocessableEntity || !strings.Contains(r.Body, `<p class="error" id="e-linehaul_usd">Enter a number`) {
		t.Errorf("bad number: %d %.2000s", r.Status, r.Body)
	}
	r = c.action(page, page+"/approve", url.Values{"mode": {"edited"}, "f.bill_id": {""}, "f.linehaul_usd": {"1700"}, "f.fuel_surcharge_usd": {"212.5"}})
	if r.Status != http.StatusUnprocessableEntity || !strings.Contains(r.Body, `id="e-bill_id"`) {
		t.Errorf("schema error: %d %.3000s", r.Status, r.Body)
	}
	r = c.action(page, page+"/approve", url.Values{"mode": {"edited"}, "f.bill_id": {"B-2"}, "f.linehaul_usd": {"1700"}, "f.fuel_surcharge_usd": {"212.5"}})
	if r.Status != http.StatusSeeOther {
		t.Fatalf("edited approve: %d %.500s", r.Status, r.Body)
	}
	v := e.Do("GET", "/v1/approvals/"+second, e.Keys[ws+"/human"], nil)
	if ep, _ := json.Marshal(v.Body["edited_payload"]); v.Body["status"] != "approved" || !strings.Contains(string(ep), `"linehaul_usd":1700`) {
		t.Errorf("edited approval: %v %s", v.Body["status"], ep)
	}

	// Reject needs a reason.
	r = c.action("/console/inbox", "/console/approvals/"+third+"/reject", url.Values{"reason": {"  "}})
	if r.Status != http.StatusUnprocessableEntity || !strings.Contains(r.Body, `id="reject-err"`) {
		t.Errorf("reject without reason: %d", r.Status)
	}
	r = c.action("/console/inbox", "/console/approvals/"+third+"/reject", url.Values{"reason": {"the rate confirmation says 1700"}})
	if r.Status != http.StatusSeeOther {
		t.Fatalf("reject: %d %.500s", r.Status, r.Body)
	}

	// The audit review: a verdict is required; then it is recorded once.
	rp := "/console/routes/" + audit
	contains(t, c.get(rp).Body, "Sampled audit", "Acme Freight", "Record review")
	r = c.action(rp, rp+"/review", url.Values{"note": {"x"}})
	if r.Status != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "Choose agree or disagree") {
		t.Errorf("review without verdict: %d", r.Status)
	}
	r = c.action(rp, rp+"/review", url.Values{"verdict": {"disagree"}, "severity": {"2"}, "correction": {`{"total_usd": 2000}`}})
	if r.Status != http.StatusSeeOther {
		t.Fatalf("review: %d %.500s", r.Status, r.Body)
	}
	r = c.action("/console/inbox", rp+"/review", url.Values{"verdict": {"agree"}})
	if r.Status != http.StatusConflict || !strings.Contains(r.Body, "reviewed already") {
		t.Errorf("second review: %d %.300s", r.Status, r.Body)
	}

	// The inbox is empty of what was decided, and every action is in the
	// audit log under the person's key id.
	in = c.get("/console/inbox")
	for _, id := range []string{first, second, third, audit} {
		if strings.Contains(in.Body, `id="item-`+id+`"`) {
			t.Errorf("%s is still in the inbox", id)
		}
	}
	count := map[string]int{}
	recs, _ := e.Store.ListAudit(context.Background(), ladder.AuditQuery{Workspace: ws, Desc: true, Limit: 200})
	for _, rec := range recs {
		if rec.Actor == keyID {
			count[rec.Kind]++
		}
	}
	if count[ladder.AuditApproval] < 3 || count[ladder.AuditReview] < 1 {
		t.Errorf("audit records by the person: %v", count)
	}
}

func TestForeignWorkspaceRefused(t *testing.T) {
	e := seeded(t)
	ap := requestApproval(t, e, "B-9")
	rt := sampledAudit(t, e, "BILL-F")
	c := signedIn(t, e, "checkcall-loads")
	missing := c.get("/console/approvals/ap_doesnotexist")
	if missing.Status != http.StatusNotFound {
		t.Fatalf("missing approval: %d", missing.Status)
	}
	for _, tc := range []struct{ foreign, none string }{
		{"/console/approvals/" + ap, "/console/approvals/ap_doesnotexist"},
		{"/console/routes/" + rt, "/console/routes/rt_doesnotexist"},
		{"/console/steps/bills/read_bill", "/console/steps/bills/no_such_step"},
	} {
		f, n := c.get(tc.foreign), c.get(tc.none)
		if f.Status != http.StatusNotFound || f.Body != n.Body {
			t.Errorf("%s: %d, differs from a missing id: %v", tc.foreign, f.Status, f.Body != n.Body)
		}
	}
	for _, path := range []string{"/console/approvals/" + ap + "/approve", "/console/approvals/" + ap + "/reject", "/console/routes/" + rt + "/review", "/console/steps/bills/read_bill/pin"} {
		r := c.action("/console/inbox", path, url.Values{"reason": {"x"}, "verdict": {"agree"}, "lane": {"human_only"}})
		if r.Status != http.StatusNotFound {
			t.Errorf("POST %s: %d", path, r.Status)
		}
	}
	if v := e.Do("GET", "/v1/approvals/"+ap, e.Keys[ws+"/human"], nil); v.Body["status"] != "pending" {
		t.Errorf("foreign approval became %v", v.Body["status"])
	}
	if strings.Contains(c.get("/console/inbox").Body, ap) {
		t.Error("another workspace's approval is in the inbox")
	}
}

func TestStepPages(t *testing.T) {
	e := seeded(t)
	c := signedIn(t, e, ws)
	steps := c.get("/console/steps")
	contains(t, steps.Body, "Read the bill", "Post to the TMS", "Runs alone (Auto)", `href="/console/steps/bills/rate_check"`)

	ev, err := e.Svc.Evidence(context.Background(), ws, "bills", "read_bill")
	if err != nil {
		t.Fatal(err)
	}
	sp := "/console/steps/bills/read_bill"
	body := c.get(sp).Body
	r4 := ev.Figures.Rolling4
	contains(t, body, "<svg", "Wilson 95% band", `class="threshold threshold-auto"`, ev.Why,
		fmt.Sprintf(`<tr id="rolling-4"><th scope="row">Last 4 weeks</th><td>%d–%d</td><td class="n">%d</td><td class="agreements">%d</td><td class="accuracy">%.4f</td><td class="lower">%.4f</td><td class="upper">%.4f</td></tr>`,
			r4.From, r4.To, r4.N, r4.Agreements, *r4.Accuracy, r4.WilsonLower, r4.WilsonUpper),
		string(ev.OutcomeTest.State), "rules (after a review by demo)")
	if len(ev.LaneChanges) == 0 {
		t.Error("read_bill has no lane changes in the demo")
	}

	// Pin needs a reason; then it pins, and unpin needs one too.
	r := c.action(sp, sp+"/pin", url.Values{"lane": {"propose"}, "reason": {""}})
	if r.Status != http.StatusUnprocessableEntity || !strings.Contains(r.Body, `id="pin-err"`) {
		t.Errorf("pin without reason: %d", r.Status)
	}
	r = c.action(sp, sp+"/pin", url.Values{"lane": {"propose"}, "reason": {"carrier format changed"}})
	if r.Status != http.StatusSeeOther || r.Location != sp+"?done=pinned" {
		t.Fatalf("pin: %d %s %.500s", r.Status, r.Location, r.Body)
	}
	body = c.get(sp + "?done=pinned").Body
	contains(t, body, "The step is pinned", "pinned by a person", "carrier format changed", "Unpin")
	r = c.action(sp, sp+"/unpin", url.Values{"reason": {""}})
	if r.Status != http.StatusUnprocessableEntity {
		t.Errorf("unpin without reason: %d", r.Status)
	}
	r = c.action(sp, sp+"/unpin", url.Values{"reason": {"fixed"}})
	if r.Status != http.StatusSeeOther {
		t.Errorf("unpin: %d", r.Status)
	}
	recs, _ := e.Store.ListAudit(context.Background(), ladder.AuditQuery{Workspace: ws, Kind: ladder.AuditPin})
	if len(recs) != 1 || recs[0].Actor != ladder.KeyID(e.Keys[ws+"/human"]) {
		t.Errorf("pin audit: %+v", recs)
	}
}

func TestGateHistoryAndAuditLog(t *testing.T) {
	e := seeded(t)
	for i := 0; i < 27; i++ {
		res := e.Do("POST", "/v1/gate/authorize", e.Keys[ws+"/agent"], map[string]any{"case": "release_payment", "precondition_fn": "score_release_hold",
			"evidence": map[string]any{"bill_id": fmt.Sprintf("B-%d", i), "pod_received": true, "invoice_matches_rate_con": true, "carrier_docs_verified": i%2 == 0, "dispute_open": false, "hold_reason_cleared_before_release": true}})
		if res.Status != http.StatusOK {
			t.Fatalf("authorize: %d %s", res.Status, res.Raw)
		}
		e.Clock.Advance(1e9)
	}
	c := signedIn(t, e, ws)
	g := c.get("/console/gate")
	contains(t, g.Body, "release_payment", "score_release_hold", "Older decisions", "PASS")
	if n := strings.Count(g.Body, `<tr id="gd_`); n != 25 {
		t.Errorf("first page has %d decisions", n)
	}
	next := g.Body[strings.Index(g.Body, `href="/console/gate?`)+6:]
	next = strings.ReplaceAll(next[:strings.Index(next, `"`)], "&amp;", "&")
	t.Logf("next page: %s", next)
	g2 := c.get(next)
	if n := strings.Count(g2.Body, `<tr id="gd_`); g2.Status != http.StatusOK || n != 2 {
		t.Errorf("second page: %d with %d decisions", g2.Status, n)
	}
	if r := c.get("/console/gate?gate_state=MAYBE"); r.Status != http.StatusBadRequest || !strings.Contains(r.Body, "allowed values") {
		t.Errorf("bad filter: %d", r.Status)
	}
	if r := c.get("/console/gate?gate_state=ESCALATE&case=release_payment"); r.Status != http.StatusOK {
		t.Errorf("filter: %d", r.Status)
	}

	a := c.get("/console/audit")
	contains(t, a.Body, "Hash chain verified up to record", "gate.decision", "console.signin")
	total, err := ladder.VerifyAudit(context.Background(), e.Store)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(a.Body, fmt.Sprintf("<strong>%d</strong>", total)) && !strings.Contains(a.Body, fmt.Sprintf("<strong>%d</strong>", total-1)) {
		t.Errorf("chain count %d not shown", total)
	}
	if r := c.get("/console/audit?before=abc"); r.Status != http.StatusBadRequest {
		t.Errorf("bad cursor: %d", r.Status)
	}
	if r := c.get("/console/audit?before=5&kind=route"); r.Status != http.StatusOK {
		t.Errorf("older page: %d", r.Status)
	}
	if r := c.get("/console/assets/style.css"); r.Status != http.StatusOK || !strings.Contains(r.Header.Get("Content-Type"), "text/css") {
		t.Errorf("style.css: %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	if r := c.get("/console/nope"); r.Status != http.StatusNotFound {
		t.Errorf("unknown page: %d", r.Status)
	}
}

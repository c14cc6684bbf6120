package console_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
)

// demoWork starts the demo as `ladder demo` does: history and the work it
// leaves waiting.
func demoWork(t *testing.T) *testenv.Env {
	t.Helper()
	return testenv.StartWith(t, "", testenv.Options{Seed: true, Work: true})
}

// TestInboxOnFirstOpen checks what a person sees on first opening the
// demo's inbox: approvals named by their business item with formatted
// money, a shadow card that speaks to the reviewer, and sampled audits
// that show what the agent did (never "null").
func TestInboxOnFirstOpen(t *testing.T) {
	e := demoWork(t)
	c := signedIn(t, e, ws)
	in := c.get("/console/inbox")
	if in.Status != http.StatusOK {
		t.Fatalf("inbox: %d", in.Status)
	}
	contains(t, in.Body,
		`Approval: <span class="item-name">BILL-771</span>`,
		`<dt>Linehaul</dt><dd>$2,450.00</dd>`, `<dt>Fuel surcharge</dt><dd>$318.50</dd>`,
		`Shadow proposal: <span class="item-name">BILL-781</span>`,
		"so a person handles BILL-781 as usual. Compare the agent&#39;s proposal below with what you did",
		`Sampled audit: <span class="item-name">BILL-7`, "What the agent did", `<dt>Amount</dt><dd>$`,
	)
	for _, bad := range []string{"rate-BILL-771", "release-BILL-781", "post-BILL-7", ">null<", "your output is compared"} {
		if strings.Contains(in.Body, bad) {
			t.Errorf("inbox shows %q", bad)
		}
	}

	// A human gate's approval is named by the payload's business id.
	pc := signedIn(t, e, "partner-programs")
	contains(t, pc.get("/console/inbox").Body, `Approval: <span class="item-name">COMM-1042</span>`, "a person approves every call of this kind")

	// A sampled audit's page shows the agent's output as fields.
	m := regexp.MustCompile(`href="/console/routes/([^"]+)"`).FindStringSubmatch(in.Body)
	if m == nil {
		t.Fatal("no sampled audit in the inbox")
	}
	r := c.get("/console/routes/" + m[1])
	contains(t, r.Body, "What the agent did", "drawn for audit", "What is the audit rate?")
	if strings.Contains(r.Body, "The agent sent no output") {
		t.Errorf("the sampled audit %s shows no output", m[1])
	}
}

// TestAuditShowsEveryCall checks that a sampled audit of a capability's
// item shows every call that ran for the item: a second call for the same
// bill runs under the same route, and the person auditing must not see
// only the first, harmless one.
func TestAuditShowsEveryCall(t *testing.T) {
	e := demoWork(t)
	c := signedIn(t, e, ws)
	in, err := e.Svc.Inbox(t.Context(), humanPrincipal(e), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var route, bill string
	for _, it := range in.Items {
		if it.Route != nil && it.Route.Step == "post_tms" {
			route, bill = it.Route.ID, it.Route.Item
			break
		}
	}
	if route == "" {
		t.Fatal("no sampled post_tms audit in the demo's inbox")
	}
	res := e.Do("POST", "/v1/capabilities/tms:postBill/call", e.Keys[ws+"/agent"], map[string]any{"bill_id": bill, "amount_usd": 98765.43, "idempotency_key": "again-" + bill})
	if res.Status != http.StatusOK || res.Body["route_id"] != route {
		t.Fatalf("second call for %s: %d %s", bill, res.Status, res.Raw)
	}
	r := c.get("/console/routes/" + route)
	contains(t, r.Body, "The 2 calls that ran for "+bill+": check each", "<dt>Amount</dt><dd>$98,765.43</dd>")
}

// TestOverview checks the workspace's home page: steps by lane, the week's
// lane changes with demotions called out, and the approvals waiting with
// their ages and the oldest one.
func TestOverview(t *testing.T) {
	e := demoWork(t)
	e.Clock.Advance(26 * time.Hour)
	c := signedIn(t, e, ws)
	if r := c.get("/console/"); r.Status != http.StatusSeeOther || r.Location != "/console/overview" {
		t.Errorf("console home: %d %s, want the overview", r.Status, r.Location)
	}
	fresh := requestApproval(t, e, "BILL-790")
	human := humanPrincipal(e)
	if _, err := e.Svc.Pin(t.Context(), human, "bills", "read_bill", pinTo("shadow", "new carrier format"), true); err != nil {
		t.Fatal(err)
	}
	r := c.get("/console/overview")
	if r.Status != http.StatusOK {
		t.Fatalf("overview: %d", r.Status)
	}
	contains(t, r.Body,
		`<strong id="waiting-approvals">4</strong> approvals`,
		`<strong id="waiting-shadows">2</strong> shadow proposals`,
		`<th scope="row">under an hour</th><td>1</td>`, `<th scope="row">1 to 24 hours</th><td>0</td>`, `<th scope="row">1 to 3 days</th><td>3</td>`,
		`1 lane change in the last 7 days, <strong>1 of them a demotion</strong>`, `<strong>demoted</strong> from <span class="lane lane-auto">auto</span> to <span class="lane lane-shadow">shadow</span>`,
		`id="ov-bills-read_bill"`, `id="ov-bills-post_tms"`,
	)
	oldest := r.Body[strings.Index(r.Body, `id="oldest"`):]
	oldest = oldest[:strings.Index(oldest, "</ol>")]
	if !strings.Contains(oldest, "waiting 26 h") || strings.Contains(oldest, fresh) {
		t.Errorf("the oldest waiting items: %s", oldest)
	}
}

// TestGateHistoryReadable checks the gate history's filters are choices of
// the workspace's known cases, functions and actions, and that the scores
// are explained where they appear.
func TestGateHistoryReadable(t *testing.T) {
	e := demoWork(t)
	c := signedIn(t, e, ws)
	r := c.get("/console/gate?action_id=release_hold")
	contains(t, r.Body,
		`<select id="g-case" name="case">`, `<option value="release_payment">Release a held payment (release_payment)</option>`,
		`<option value="score_release_hold">score_release_hold</option>`,
		`<option value="release_hold" selected>Release the held payment (release_hold)</option>`,
		`<abbr title="Relevance">R</abbr>`, "What R, C, O, Ro and Q mean", "Ordering: things happened in the required order",
		`<td class="when" data-label="When">`,
	)
	if strings.Contains(r.Body, `<input type="text" id="g-case"`) {
		t.Error("the case filter is still free text")
	}
	if n := strings.Count(r.Body, `<tr id="`); n != 3 {
		t.Errorf("%d release_hold decisions, want the 3 seeded", n)
	}
}

// TestAuditLogReadable checks audit rows read as fields, not raw JSON, and
// that sign-ins do not flood the log: a run of them is one row by default,
// and the kind filter shows each.
func TestAuditLogReadable(t *testing.T) {
	e := demoWork(t)
	for range 5 {
		signedIn(t, e, ws)
	}
	c := signedIn(t, e, ws)
	r := c.get("/console/audit")
	contains(t, r.Body, `<option value="console.signin">console.signin</option>`, "6 sign-ins and sign-outs since", `href="/console/audit?kind=console.signin"`,
		`<dt>Item</dt><dd>BILL-`, `<dt>Decision</dt><dd>act_alone</dd>`)
	if n := strings.Count(r.Body, "<td data-label=\"Kind\">console.signin</td>"); n != 0 {
		t.Errorf("%d sign-in rows by default, want them folded", n)
	}
	r = c.get("/console/audit?kind=console.signin")
	if n := strings.Count(r.Body, "<td data-label=\"Kind\">console.signin</td>"); n != 6 {
		t.Errorf("%d sign-in rows with the kind filter, want 6", n)
	}
}

func humanPrincipal(e *testenv.Env) ladder.Principal {
	return ladder.Principal{KeyID: ladder.KeyID(e.Keys[ws+"/human"]), Workspace: ws, Kind: ladder.KeyHuman}
}

func pinTo(lane, reason string) ladder.PinRequest {
	return ladder.PinRequest{Lane: lane, Reason: reason}
}

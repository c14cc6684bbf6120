package console_test

import (
	"encoding/base64"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder/internal/testenv"
)

var (
	itemRE = regexp.MustCompile(`<li class="item item-[a-z]+" id="item-([^"]+)"`)
	nextRE = regexp.MustCompile(`<a href="([^"]+)" rel="next" id="inbox-next">`)
)

// shadowProposal has the agent call rates:approveRate while rate_check is
// in shadow and returns the id of the proposal it recorded.
func shadowProposal(t *testing.T, e *testenv.Env, bill string) string {
	t.Helper()
	res := e.Do("POST", "/v1/capabilities/rates:approveRate/call", e.Keys[ws+"/agent"], map[string]any{
		"bill_id": bill, "linehaul_usd": 1850.0, "fuel_surcharge_usd": 212.5, "idempotency_key": "rate-" + bill})
	data, _ := res.Body["error"].(map[string]any)["data"].(map[string]any)
	id, _ := data["proposal_id"].(string)
	if res.ErrorCode() != "STEP_NEEDS_PERSON" || id == "" {
		t.Fatalf("shadow call: %d %s", res.Status, res.Raw)
	}
	return id
}

// TestInboxPages fills the inbox with more than a page of each kind and
// follows the older-items links: each page holds at most 25 items, newest
// first, and every item shows on exactly one page (issue 15: the inbox
// rendered everything at once).
func TestInboxPages(t *testing.T) {
	e := testenv.Start(t, "")
	var want []string // oldest first; reversed below
	for i := range 40 {
		want = append(want, requestApproval(t, e, fmt.Sprintf("B-P%02d", i)))
		e.Clock.Advance(time.Second)
	}
	c := signedIn(t, e, ws)
	sp := "/console/steps/bills/rate_check"
	if r := c.action(sp, sp+"/pin", url.Values{"lane": {"shadow"}, "reason": {"compare with the new rate table"}}); r.Status != http.StatusSeeOther {
		t.Fatalf("pin: %d %.300s", r.Status, r.Body)
	}
	for i := range 30 {
		want = append(want, shadowProposal(t, e, fmt.Sprintf("B-S%02d", i)))
		e.Clock.Advance(time.Second)
	}
	// Dozens of routes that are not sampled lie between the items; one is.
	want = append(want, sampledAudit(t, e, "BILL-PG"))
	slices.Reverse(want)

	var got []string
	pages := 0
	for next := "/console/inbox"; next != ""; pages++ {
		if pages == 10 {
			t.Fatal("the inbox does not end")
		}
		r := c.get(next)
		if r.Status != http.StatusOK {
			t.Fatalf("%s: %d %.300s", next, r.Status, r.Body)
		}
		n := 0
		for _, m := range itemRE.FindAllStringSubmatch(r.Body, -1) {
			got = append(got, m[1])
			n++
		}
		if n > 25 {
			t.Errorf("page %d holds %d items, more than 25", pages+1, n)
		}
		if pages > 0 && !strings.Contains(r.Body, `<a href="/console/inbox">Newest</a>`) {
			t.Errorf("page %d has no link to the newest", pages+1)
		}
		next = ""
		if m := nextRE.FindStringSubmatch(r.Body); m != nil {
			next = html.UnescapeString(m[1])
		}
	}
	if pages != 3 {
		t.Errorf("%d items on %d pages, want 3", len(got), pages)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("items over every page, newest first (-want +got):\n%s", diff)
	}

	// A cursor the server did not issue is refused.
	for _, bad := range []string{"forged", "ib1:1.2", "ib1:-2.0.0", "ib1:1.2.x", "ap1:5"} {
		if bad != "forged" {
			bad = base64.RawURLEncoding.EncodeToString([]byte(bad))
		}
		if r := c.get("/console/inbox?cursor=" + bad); r.Status != http.StatusBadRequest || !strings.Contains(r.Body, "cursor") {
			t.Errorf("cursor %q: %d", bad, r.Status)
		}
	}
}

// itemBlock returns the inbox markup of one item.
func itemBlock(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `id="item-`+id+`"`)
	if i < 0 {
		t.Fatalf("%s is not in the inbox", id)
	}
	j := strings.Index(body[i:], "</li>")
	return body[i : i+j]
}

// TestInboxShowsLaneChange: a proposal whose step was pinned to human_only
// since shows the approver both lanes and what approving does; approving
// runs the call once, and the agent's next call meets the new lane.
func TestInboxShowsLaneChange(t *testing.T) {
	e := testenv.Start(t, "")
	ap := requestApproval(t, e, "B-L1")
	c := signedIn(t, e, ws)
	const note = "The step's lane changed since the agent proposed this:"
	if strings.Contains(itemBlock(t, c.get("/console/inbox").Body, ap), "lane-changed") {
		t.Error("the lane has not changed, yet the inbox says so")
	}

	sp := "/console/steps/bills/rate_check"
	if r := c.action(sp, sp+"/pin", url.Values{"lane": {"human_only"}, "reason": {"rate table under review"}}); r.Status != http.StatusSeeOther {
		t.Fatalf("pin: %d %.300s", r.Status, r.Body)
	}
	for _, pg := range []string{itemBlock(t, c.get("/console/inbox").Body, ap), c.get("/console/approvals/" + ap).Body} {
		contains(t, pg, note, `it was <span class="lane lane-propose">propose</span> and is now <span class="lane lane-human_only">human only</span>`,
			"Approving still runs this call once, as you decide")
	}

	calls := e.Upstream.Calls()
	if r := c.action("/console/inbox", "/console/approvals/"+ap+"/approve", url.Values{"mode": {"as-proposed"}}); r.Status != http.StatusSeeOther || r.Location != "/console/inbox?done=approved" {
		t.Fatalf("approve: %d %s %.300s", r.Status, r.Location, r.Body)
	}
	if v := e.Do("GET", "/v1/approvals/"+ap, e.Keys[ws+"/human"], nil); v.Body["status"] != "approved" || v.Body["call_id"] == nil {
		t.Errorf("approval after approving: %v, call %v", v.Body["status"], v.Body["call_id"])
	}
	if n := e.Upstream.Calls() - calls; n != 1 {
		t.Errorf("approving ran the call %d times, want once", n)
	}
	// The new lane governs the agent's next call for the step.
	res := e.Do("POST", "/v1/capabilities/rates:approveRate/call", e.Keys[ws+"/agent"], map[string]any{
		"bill_id": "B-L2", "linehaul_usd": 1850.0, "fuel_surcharge_usd": 212.5, "idempotency_key": "rate-B-L2"})
	if res.ErrorCode() != "STEP_NEEDS_PERSON" {
		t.Errorf("the agent's next call: %d %s", res.Status, res.Raw)
	}
}

package console_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/ladderhq/ladder"
)

// TestAuditPageFilters filters the audit page as GET /v1/audit filters:
// only matching rows of the workspace, a next-page link that keeps the
// filters and pages by cursor, and a bad filter shown as a problem naming
// the fix.
func TestAuditPageFilters(t *testing.T) {
	e := seeded(t)
	for i := range 60 {
		step := "post_tms"
		if i%3 == 0 {
			step = "read_bill"
		}
		if res := e.Do("POST", "/v1/route", e.Keys[ws+"/agent"], map[string]any{"queue": "bills", "step": step, "item": fmt.Sprintf("F-%d", i)}); res.Status != http.StatusOK {
			t.Fatalf("route: %d %s", res.Status, res.Raw)
		}
	}
	c := signedIn(t, e, ws)
	agent := ladder.KeyID(e.Keys[ws+"/agent"])
	row := regexp.MustCompile(`<tr><th scope="row" data-label="Seq">(\d+)</th><td class="when".*?</td><td data-label="Kind">([^<]*)</td><td data-label="Actor"><code>([^<]*)</code>.*?<summary>JSON</summary><code>([^<]*)</code>`)

	seen := map[string]bool{}
	path := "/console/audit?kind=route&actor=" + agent + "&step=bills%2Fpost_tms"
	for pages := 0; path != ""; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		r := c.get(path)
		if r.Status != http.StatusOK {
			t.Fatalf("%s: %d", path, r.Status)
		}
		contains(t, r.Body, `value="bills/post_tms"`, `value="`+agent+`"`)
		for _, m := range row.FindAllStringSubmatch(r.Body, -1) {
			if m[2] != ladder.AuditRoute || m[3] != agent || !strings.Contains(m[4], "&#34;step&#34;:&#34;post_tms&#34;") {
				t.Errorf("row %s does not match the filter: kind %s actor %s data %s", m[1], m[2], m[3], m[4])
			}
			if seen[m[1]] {
				t.Errorf("row %s on two pages", m[1])
			}
			seen[m[1]] = true
		}
		path = ""
		if i := strings.Index(r.Body, `rel="next"`); i >= 0 {
			link := r.Body[strings.LastIndex(r.Body[:i], `href="`)+6:]
			path = strings.ReplaceAll(link[:strings.Index(link, `"`)], "&amp;", "&")
			if !strings.Contains(path, "cursor=") || !strings.Contains(path, "step=bills%2Fpost_tms") {
				t.Errorf("next link %q loses the cursor or the filters", path)
			}
		}
	}
	if len(seen) != 40 {
		t.Errorf("%d post_tms routes over the pages, want 40", len(seen))
	}

	r := c.get("/console/audit?since=last+week")
	if r.Status != http.StatusBadRequest {
		t.Errorf("bad since: %d", r.Status)
	}
	contains(t, r.Body, `role="alert"`, "is not an RFC 3339 time or a date", "send since like 2026-09-01", `id="chain"`)
}

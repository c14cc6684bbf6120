package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/translog"
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

// TestAuditPageCheckpointAndProof: the audit page shows the workspace's
// latest signed checkpoint (size, root, time, signer key) and a proof link
// per record, which downloads the record's inclusion proof as JSON that
// checks against the checkpoint with the server's public key; a record of
// another workspace has no proof here.
func TestAuditPageCheckpointAndProof(t *testing.T) {
	e := seeded(t)
	c := signedIn(t, e, ws)
	r := c.get("/console/audit")
	if r.Status != http.StatusOK {
		t.Fatalf("audit page: %d", r.Status)
	}
	name, _, _ := strings.Cut(e.CheckpointKey, "+")
	contains(t, r.Body, `id="checkpoint"`, "Latest signed checkpoint", "<dt>Signer key</dt><dd><code>"+name+"</code>")
	m := regexp.MustCompile(`<dt>Size</dt><dd>(\d+) records</dd>.*?<dt>Root hash</dt><dd><code class="hash">([^<]+)</code>`).FindStringSubmatch(strings.ReplaceAll(r.Body, "\n", ""))
	if m == nil {
		t.Fatalf("no checkpoint size and root on the page")
	}
	link := regexp.MustCompile(`href="/console/audit/records/(\d+)/proof" download`).FindStringSubmatch(r.Body)
	if link == nil {
		t.Fatal("no proof link on the audit page")
	}
	p := c.get("/console/audit/records/" + link[1] + "/proof")
	if p.Status != http.StatusOK || !strings.HasPrefix(p.Header.Get("Content-Disposition"), "attachment;") || p.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("proof download: %d %v", p.Status, p.Header)
	}
	var proof ladder.AuditProof
	if err := json.Unmarshal([]byte(p.Body), &proof); err != nil {
		t.Fatal(err)
	}
	cp, err := translog.Open(proof.Checkpoint.Note, e.CheckpointKey)
	if err != nil {
		t.Fatal(err)
	}
	hashes := make(tlog.RecordProof, len(proof.Proof))
	for i, h := range proof.Proof {
		if hashes[i], err = tlog.ParseHash(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := tlog.CheckRecord(hashes, cp.Tree.N, cp.Tree.Hash, proof.Leaf, translog.LeafHash(proof.Record)); err != nil || strconv.FormatInt(proof.Record.Seq, 10) != link[1] {
		t.Errorf("the downloaded proof of record %s does not check: %v (record %d)", link[1], err, proof.Record.Seq)
	}
	if cp.Tree.N < mustInt(t, m[1]) {
		t.Errorf("page shows size %s, proof's checkpoint %d", m[1], cp.Tree.N)
	}

	var other int64
	if err := e.Store.WalkAudit(t.Context(), 0, func(r ladder.AuditRecord) error {
		if other == 0 && r.Workspace != ws {
			other = r.Seq
		}
		return nil
	}); err != nil || other == 0 {
		t.Fatalf("no record of another workspace: %v", err)
	}
	for _, seq := range []string{strconv.FormatInt(other, 10), "987654321", "x"} {
		if r := c.get("/console/audit/records/" + seq + "/proof"); r.Status != http.StatusNotFound || strings.Contains(r.Body, `"proof"`) {
			t.Errorf("proof of record %s (not this workspace's): %d", seq, r.Status)
		}
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

package http_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"golang.org/x/mod/sumdb/tlog"
	"io"
	"math/bits"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/client"
	"github.com/ladderhq/ladder/internal/testenv"
)

const auditWS = "vantrow-bills"

// auditModel is every stored record of workspace, newest first: what the
// audit endpoints must answer, computed from the store directly.
func auditModel(t *testing.T, e *testenv.Env, workspace string, keep func(ladder.AuditRecord) bool) []ladder.AuditRecord {
	t.Helper()
	var out []ladder.AuditRecord
	if err := e.Store.WalkAudit(context.Background(), 0, func(r ladder.AuditRecord) error {
		if r.Workspace == workspace && (keep == nil || keep(r)) {
			out = append(out, r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Reverse(out)
	return out
}

// listAll pages through GET /v1/audit with req until the last page.
func listAll(t *testing.T, c *client.Client, req ladder.AuditListRequest) []ladder.AuditRecord {
	t.Helper()
	var out []ladder.AuditRecord
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("paging does not end")
		}
		p, err := c.AuditList(context.Background(), req)
		if err != nil {
			t.Fatalf("AuditList %+v: %v", req, err)
		}
		out = append(out, p.Records...)
		if p.NextCursor == "" {
			if p.HasMore {
				t.Fatalf("has_more without next_cursor")
			}
			return out
		}
		req.Cursor = p.NextCursor
	}
}

// auditActivity makes records of every kind the filters tell apart: routes
// by the agent key at two steps, a review by the person, over two days.
func auditActivity(t *testing.T, e *testenv.Env) {
	t.Helper()
	for i := range 6 {
		step := "post_tms"
		if i%2 == 1 {
			step = "read_bill"
		}
		res := e.Do("POST", "/v1/route", e.Keys[auditWS+"/agent"], map[string]any{"queue": "bills", "step": step, "item": fmt.Sprintf("AT-%d", i)})
		if res.Status != http.StatusOK {
			t.Fatalf("route: %d %s", res.Status, res.Raw)
		}
		if i == 2 {
			rv := e.Do("POST", "/v1/routes/"+res.Body["route_id"].(string)+"/review", e.Keys[auditWS+"/human"], map[string]any{"verdict": "agree"})
			if rv.Status != http.StatusCreated {
				t.Fatalf("review: %d %s", rv.Status, rv.Raw)
			}
		}
		e.Clock.Advance(6 * time.Hour)
	}
}

func seqsOf(recs []ladder.AuditRecord) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

// TestAuditListFilters pages GET /v1/audit under every filter and checks
// each answer against the store: the key's workspace only, newest first,
// no gaps or repeats across pages.
func TestAuditListFilters(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	auditActivity(t, e)
	agentID := ladder.KeyID(e.Keys[auditWS+"/agent"])
	humanID := ladder.KeyID(e.Keys[auditWS+"/human"])
	start := e.Clock.Now().Add(-36 * time.Hour).UTC()
	day := start.Format(time.DateOnly)
	since := start.Add(time.Hour)
	until := start.Add(20 * time.Hour)

	stepIs := func(queue, step string) func(ladder.AuditRecord) bool {
		return func(r ladder.AuditRecord) bool {
			q, s := ladder.AuditStepOf(r.Data)
			return s == step && (queue == "" || q == queue)
		}
	}
	dayStart, _ := time.Parse(time.DateOnly, day)
	for _, tc := range []struct {
		name string
		key  string
		ws   string
		req  ladder.AuditListRequest
		keep func(ladder.AuditRecord) bool
	}{
		{"everything", auditWS + "/human", auditWS, ladder.AuditListRequest{Limit: 500}, nil},
		{"another workspace", "checkcall-loads/human", "checkcall-loads", ladder.AuditListRequest{Limit: 500}, nil},
		{"admin key", auditWS + "/admin", auditWS, ladder.AuditListRequest{Limit: 500}, nil},
		{"kind", auditWS + "/human", auditWS, ladder.AuditListRequest{Kind: ladder.AuditRoute, Limit: 7},
			func(r ladder.AuditRecord) bool { return r.Kind == ladder.AuditRoute }},
		{"actor", auditWS + "/human", auditWS, ladder.AuditListRequest{Actor: agentID, Limit: 2},
			func(r ladder.AuditRecord) bool { return r.Actor == agentID }},
		{"actor (person)", auditWS + "/human", auditWS, ladder.AuditListRequest{Actor: humanID},
			func(r ladder.AuditRecord) bool { return r.Actor == humanID }},
		{"step id", auditWS + "/human", auditWS, ladder.AuditListRequest{Step: "post_tms", Limit: 50}, stepIs("", "post_tms")},
		{"queue/step", auditWS + "/human", auditWS, ladder.AuditListRequest{Step: "bills/read_bill", Limit: 50}, stepIs("bills", "read_bill")},
		{"since and until (RFC 3339)", auditWS + "/human", auditWS, ladder.AuditListRequest{Since: since.Format(time.RFC3339), Until: until.Format(time.RFC3339Nano), Limit: 3},
			func(r ladder.AuditRecord) bool { return !r.At.Before(since) && r.At.Before(until) }},
		{"since and until (one date)", auditWS + "/human", auditWS, ladder.AuditListRequest{Since: day, Until: day, Limit: 4},
			func(r ladder.AuditRecord) bool {
				return !r.At.Before(dayStart) && r.At.Before(dayStart.AddDate(0, 0, 1))
			}},
		{"every filter", auditWS + "/human", auditWS, ladder.AuditListRequest{Kind: ladder.AuditRoute, Actor: agentID, Step: "bills/post_tms", Since: since.Format(time.RFC3339), Limit: 1},
			func(r ladder.AuditRecord) bool {
				return r.Kind == ladder.AuditRoute && r.Actor == agentID && stepIs("bills", "post_tms")(r) && !r.At.Before(since)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := auditModel(t, e, tc.ws, tc.keep)
			if len(want) == 0 {
				t.Fatal("the model is empty; the test data no longer covers this filter")
			}
			got := listAll(t, client.New(e.Server.URL, e.Keys[tc.key]), tc.req)
			if diff := cmp.Diff(seqsOf(want), seqsOf(got)); diff != "" {
				t.Errorf("seqs (-want +got):\n%s", diff)
			}
			// Each record is exactly the stored one.
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
	// A filter that matches nothing is an empty page, not an error.
	p, err := client.New(e.Server.URL, e.Keys[auditWS+"/human"]).AuditList(t.Context(), ladder.AuditListRequest{Actor: "nobody"})
	if err != nil || len(p.Records) != 0 || p.HasMore {
		t.Errorf("no match: %+v, %v", p, err)
	}
}

// TestAuditRefusals checks the key kinds and every bad parameter: 400 with
// data.field naming it.
func TestAuditRefusals(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{})
	human := e.Keys[auditWS+"/human"]
	for _, path := range []string{"/v1/audit", "/v1/audit/verify", "/v1/audit/export"} {
		res := e.Do("GET", path, e.Keys[auditWS+"/agent"], nil)
		if res.Status != http.StatusForbidden || res.ErrorCode() != string(ladder.CodeAgentKeyRefused) {
			t.Errorf("%s with an agent key: %d %s", path, res.Status, res.Raw)
		}
		if res := e.Do("GET", path, "", nil); res.Status != http.StatusUnauthorized {
			t.Errorf("%s without a key: %d", path, res.Status)
		}
	}
	for _, tc := range []struct {
		path, field, code, hint string
	}{
		{"/v1/audit?limit=0", "limit", "INVALID_ARGUMENT", "1 to 500"},
		{"/v1/audit?limit=501", "limit", "INVALID_ARGUMENT", "1 to 500"},
		{"/v1/audit?limit=ten", "limit", "INVALID_ARGUMENT", "1 to 500"},
		{"/v1/audit?since=yesterday", "since", "INVALID_ARGUMENT", "2026-09-01"},
		{"/v1/audit?until=2026-13-01", "until", "INVALID_ARGUMENT", "2026-09-01T09:00:00Z"},
		{"/v1/audit?cursor=bm9wZQ", "cursor", "BAD_CURSOR", "next_cursor"},
		{"/v1/audit?cursor=" + "Z2gxOjU", "cursor", "BAD_CURSOR", "next_cursor"}, // a gate history cursor
		{"/v1/audit?step=a/b/c", "step", "INVALID_ARGUMENT", "bills/post_tms"},
		{"/v1/audit?step=/post_tms", "step", "INVALID_ARGUMENT", "bills/post_tms"},
		{"/v1/audit?workspace=checkcall-loads", "workspace", "INVALID_ARGUMENT", "filter with"},
		{"/v1/audit/export?format=xml", "format", "INVALID_ARGUMENT", "format=log"},
		{"/v1/audit/export?cursor=x", "cursor", "INVALID_ARGUMENT", "the export takes format"},
		{"/v1/audit/export?since=Monday", "since", "INVALID_ARGUMENT", "2026-09-01"},
		{"/v1/audit/verify?deep=1", "deep", "INVALID_ARGUMENT", "no parameters"},
	} {
		res := e.Do("GET", tc.path, human, nil)
		errBody, _ := res.Body["error"].(map[string]any)
		data, _ := errBody["data"].(map[string]any)
		msg, _ := errBody["message"].(string)
		if res.Status != http.StatusBadRequest || res.ErrorCode() != tc.code || data["field"] != tc.field ||
			!strings.Contains(res.ErrorHint(), tc.hint) || msg == "" || tc.code != "BAD_CURSOR" && !strings.HasSuffix(msg, ".") {
			t.Errorf("%s: %d %s; want 400 %s naming %s with %q in the hint", tc.path, res.Status, res.Raw, tc.code, tc.field, tc.hint)
		}
	}
}

// TestAuditCursorUnderAppends pages newest first while another goroutine
// appends: the pages hold exactly the records that existed when the first
// page was read, in order, with no gap and no repeat.
func TestAuditCursorUnderAppends(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	for i := range 40 {
		if res := e.Do("POST", "/v1/route", e.Keys[auditWS+"/agent"], map[string]any{"queue": "bills", "step": "post_tms", "item": fmt.Sprintf("P-%d", i)}); res.Status != http.StatusOK {
			t.Fatalf("route: %d %s", res.Status, res.Raw)
		}
	}
	c := client.New(e.Server.URL, e.Keys[auditWS+"/human"])
	first, err := c.AuditList(t.Context(), ladder.AuditListRequest{Limit: 6})
	if err != nil || len(first.Records) == 0 {
		t.Fatalf("first page: %v", err)
	}
	top := first.Records[0].Seq

	stop := make(chan struct{})
	var (
		wg       sync.WaitGroup
		appended atomic.Int64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			res := e.Do("POST", "/v1/route", e.Keys[auditWS+"/agent"], map[string]any{"queue": "bills", "step": "read_bill", "item": fmt.Sprintf("C-%d", i)})
			if res.Status != http.StatusOK {
				t.Errorf("route during paging: %d %s", res.Status, res.Raw)
				return
			}
			appended.Add(1)
		}
	}()
	// awaitAppend waits for the appender to add a record, so every page
	// is read after records were added above the cursor.
	awaitAppend := func() {
		n := appended.Load()
		for deadline := time.Now().Add(10 * time.Second); appended.Load() == n; {
			if time.Now().After(deadline) {
				t.Fatal("no record appended while paging")
			}
			time.Sleep(time.Millisecond)
		}
	}
	got := first.Records
	req := ladder.AuditListRequest{Limit: 6, Cursor: first.NextCursor}
	for req.Cursor != "" {
		awaitAppend()
		p, err := c.AuditList(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Records...)
		req.Cursor = p.NextCursor
	}
	close(stop)
	wg.Wait()
	want := auditModel(t, e, auditWS, func(r ladder.AuditRecord) bool { return r.Seq <= top })
	if diff := cmp.Diff(seqsOf(want), seqsOf(got)); diff != "" {
		t.Errorf("paged seqs (-want +got):\n%s", diff)
	}
	// The appended records are on the next first page.
	now, err := c.AuditList(t.Context(), ladder.AuditListRequest{Limit: 1})
	if err != nil || now.Records[0].Seq <= top {
		t.Errorf("newest after the appends: %+v, %v", now.Records, err)
	}
}

// TestAuditExport streams both formats and reads them back: JSON lines are
// the stored records byte for byte (every hash recomputes), CSV has the
// header and one row per record, both with the list's filters and scope.
func TestAuditExport(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	auditActivity(t, e)
	human := e.Keys[auditWS+"/human"]

	resp := exportGet(t, e, "/v1/audit/export", human)
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("jsonl Content-Type %q", ct)
	}
	if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment;") || !strings.Contains(cd, ".jsonl") {
		t.Errorf("jsonl Content-Disposition %q", cd)
	}
	var lines []ladder.AuditRecord
	sc := bufio.NewScanner(bytes.NewReader(resp.body))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var r ladder.AuditRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if want := ladder.ChainHash(r.PrevHash, r); r.Hash != want {
			t.Errorf("record %d: hash does not recompute from the exported line", r.Seq)
		}
		lines = append(lines, r)
	}
	want := auditModel(t, e, auditWS, nil)
	slices.Reverse(want) // an export is oldest first
	if diff := cmp.Diff(want, lines, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("jsonl export (-want +got):\n%s", diff)
	}

	resp = exportGet(t, e, "/v1/audit/export?format=csv&kind=route&step=bills/post_tms", human)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
		t.Errorf("csv Content-Type %q", ct)
	}
	rows, err := csv.NewReader(bytes.NewReader(resp.body)).ReadAll()
	if err != nil {
		t.Fatalf("csv: %v", err)
	}
	if diff := cmp.Diff(ladder.AuditCSVHeader(), rows[0]); diff != "" {
		t.Errorf("csv header (-want +got):\n%s", diff)
	}
	wantRows := [][]string{ladder.AuditCSVHeader()}
	for _, r := range auditModel(t, e, auditWS, func(r ladder.AuditRecord) bool {
		q, s := ladder.AuditStepOf(r.Data)
		return r.Kind == ladder.AuditRoute && q == "bills" && s == "post_tms"
	}) {
		wantRows = append(wantRows, []string{strconv.FormatInt(r.Seq, 10), r.At.Format(time.RFC3339Nano), r.Workspace, r.Kind, r.Actor, r.Subject,
			"bills/post_tms", r.Hash, r.PrevHash, string(r.Data)})
	}
	slices.Reverse(wantRows[1:])
	if len(wantRows) < 3 {
		t.Fatalf("only %d matching records; the test data no longer covers the filter", len(wantRows)-1)
	}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("csv export (-want +got):\n%s", diff)
	}

	// A filter matching nothing is an empty export (a CSV keeps its header).
	resp = exportGet(t, e, "/v1/audit/export?format=csv&actor=nobody", human)
	if string(resp.body) != strings.Join(ladder.AuditCSVHeader(), ",")+"\n" {
		t.Errorf("empty csv export: %q", resp.body)
	}

	// The client streams the same bytes.
	var buf bytes.Buffer
	n, err := client.New(e.Server.URL, human).AuditExport(t.Context(), ladder.AuditListRequest{Kind: ladder.AuditRoute, Step: "bills/post_tms"}, ladder.AuditFormatCSV, &buf)
	if err != nil || n != int64(buf.Len()) || buf.String() != strings.Join(func() []string {
		var out []string
		for _, r := range wantRows {
			var b bytes.Buffer
			w := csv.NewWriter(&b)
			w.Write(r)
			w.Flush()
			out = append(out, strings.TrimSuffix(b.String(), "\n"))
		}
		return out
	}(), "\n")+"\n" {
		t.Errorf("client export: %d bytes, %v", n, err)
	}
	if _, err := client.New(e.Server.URL, e.Keys[auditWS+"/agent"]).AuditExport(t.Context(), ladder.AuditListRequest{}, "", io.Discard); ladder.ErrorCode(err) != ladder.CodeAgentKeyRefused {
		t.Errorf("client export with an agent key: %v", err)
	}
}

type exportResponse struct {
	Header http.Header
	body   []byte
}

func exportGet(t *testing.T, e *testenv.Env, path, key string) exportResponse {
	t.Helper()
	req, _ := http.NewRequest("GET", e.Server.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := e.Server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, body, err)
	}
	return exportResponse{Header: resp.Header, body: body}
}

// TestAuditVerify checks the chain's state over REST, then alters one
// record in the SQLite file as someone with write access would: verify
// names the first bad record and shows nothing of any record's content.
func TestAuditVerify(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ladder.db")
	e := testenv.StartWith(t, "", testenv.Options{Seed: true, DBPath: db})
	c := client.New(e.Server.URL, e.Keys[auditWS+"/human"])
	total, err := ladder.VerifyAudit(t.Context(), e.Store)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.AuditVerify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Intact || res.Verified != total || res.FirstBadSeq != nil || res.Reason != "" || res.LastHash == "" {
		t.Errorf("intact chain: %+v, want %d verified", res, total)
	}

	// Tamper with a record of another workspace.
	var seq int64
	if err := e.Store.WalkAudit(t.Context(), 0, func(r ladder.AuditRecord) error {
		if seq == 0 && r.Seq > 3 && r.Workspace == "checkcall-loads" {
			seq = r.Seq
		}
		return nil
	}); err != nil || seq == 0 {
		t.Fatalf("no record to alter: %v", err)
	}
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`DROP TRIGGER audit_no_update; UPDATE audit SET subject = 'mallory-was-here' WHERE seq = ?`, seq); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	r := e.Do("GET", "/v1/audit/verify", e.Keys[auditWS+"/admin"], nil)
	if r.Status != http.StatusOK {
		t.Fatalf("verify: %d %s", r.Status, r.Raw)
	}
	var got ladder.AuditVerifyResult
	if err := json.Unmarshal(r.Raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Intact || got.Verified != seq-1 || got.FirstBadSeq == nil || *got.FirstBadSeq != seq || !strings.Contains(got.Reason, fmt.Sprintf("audit record %d", seq)) {
		t.Errorf("tampered chain: %s, want first bad record %d", r.Raw, seq)
	}
	var fields map[string]any
	_ = json.Unmarshal(r.Raw, &fields)
	if diff := cmp.Diff([]string{"first_bad_seq", "intact", "last_hash", "logs", "reason", "verified"}, slices.Sorted(func(yield func(string) bool) {
		for k := range fields {
			if !yield(k) {
				return
			}
		}
	})); diff != "" || strings.Contains(string(r.Raw), "mallory") || strings.Contains(string(r.Raw), "checkcall") {
		t.Errorf("verify shows more than counts: %s (fields -want +got):\n%s", r.Raw, diff)
	}
}

// TestAuditVerifyLogs: GET /v1/audit/verify re-checks the caller's
// workspace's transparency log, and names what broke and where when a
// stored leaf hash, a stored tree hash or a checkpoint's root was altered
// behind the server's back (the chain itself still verifying).
func TestAuditVerifyLogs(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ladder.db")
	e := testenv.StartWith(t, "", testenv.Options{Seed: true, DBPath: db})
	key := e.Keys[auditWS+"/human"]
	verify := func() ladder.AuditVerifyResult {
		t.Helper()
		r := e.Do("GET", "/v1/audit/verify", key, nil)
		var got ladder.AuditVerifyResult
		if r.Status != http.StatusOK || json.Unmarshal(r.Raw, &got) != nil {
			t.Fatalf("verify: %d %s", r.Status, r.Raw)
		}
		return got
	}
	if r := e.Do("GET", "/v1/audit/checkpoint", key, nil); r.Status != http.StatusOK {
		t.Fatalf("checkpoint: %d %s", r.Status, r.Raw)
	}
	got := verify()
	if !got.Intact || len(got.Logs) != 1 || got.Logs[0].Workspace != auditWS || !got.Logs[0].Intact || got.Logs[0].CheckpointSize == 0 || got.Logs[0].Leaves < got.Logs[0].CheckpointSize {
		t.Fatalf("intact log: %+v", got)
	}
	size := got.Logs[0].CheckpointSize
	recs, err := e.Store.ListAudit(t.Context(), ladder.AuditQuery{Workspace: auditWS, Limit: 3})
	if err != nil || len(recs) < 3 {
		t.Fatalf("records: %v, %v", recs, err)
	}
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, tc := range []struct {
		name        string
		tamper, fix string
		args        []any
		wantSeq     int64
		wantReason  string
	}{
		{"leaf hash", `UPDATE tlog_hash SET hash = zeroblob(32) WHERE workspace = ? AND idx = ?`, "",
			[]any{auditWS, tlog.StoredHashIndex(0, 2)}, recs[2].Seq, fmt.Sprintf("Record %d (leaf 2 of workspace %s) does not hash to the leaf hash", recs[2].Seq, auditWS)},
		{"inner tree hash", `UPDATE tlog_hash SET hash = zeroblob(32) WHERE workspace = ? AND idx = ?`, "",
			// The hash of the tree's first, largest complete subtree, which
			// the root is computed from.
			[]any{auditWS, tlog.StoredHashIndex(bits.Len64(uint64(size))-1, 0)}, 0, "stored tree hashes give root"},
		{"checkpoint root", `UPDATE tlog_checkpoint SET root = zeroblob(32) WHERE workspace = ? AND size = ?`, "",
			[]any{auditWS, size}, 0, "is stored with another size or root than its signed note states"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var old []byte
			sel := strings.Replace(strings.Replace(tc.tamper, "UPDATE", "SELECT", 1), "SET hash = zeroblob(32)", "", 1)
			sel = strings.Replace(sel, "SET root = zeroblob(32)", "", 1)
			col := "hash"
			if strings.Contains(tc.tamper, "root") {
				col = "root"
			}
			sel = strings.Replace(sel, "SELECT", "SELECT "+col+" FROM", 1)
			if err := raw.QueryRow(sel, tc.args...).Scan(&old); err != nil {
				t.Fatalf("%s: %v", sel, err)
			}
			if _, err := raw.Exec(tc.tamper, tc.args...); err != nil {
				t.Fatal(err)
			}
			defer func() {
				restore := strings.Replace(tc.tamper, "zeroblob(32)", "?", 1)
				if _, err := raw.Exec(restore, append([]any{old}, tc.args...)...); err != nil {
					t.Fatal(err)
				}
			}()
			got := verify()
			if got.Intact || len(got.Logs) != 1 || got.Logs[0].Intact || !strings.Contains(got.Logs[0].Reason, tc.wantReason) {
				t.Fatalf("verify after altering the %s: %+v, want a reason with %q", tc.name, got.Logs, tc.wantReason)
			}
			if bad := got.Logs[0].BadSeq; (tc.wantSeq == 0) != (bad == nil) || bad != nil && *bad != tc.wantSeq {
				t.Errorf("bad seq = %v, want %d", bad, tc.wantSeq)
			}
			if got.FirstBadSeq != nil {
				t.Errorf("the chain is reported broken at %d; only the log was altered", *got.FirstBadSeq)
			}
		})
	}
	if got := verify(); !got.Intact {
		t.Errorf("after restoring: %+v", got)
	}
}

// gatedStore holds the export's store reads past record gateAfterSeq until
// the test lets them go, to show the first records reach the client
// before the rest is read.
type gatedStore struct {
	ladder.Store
	armed   atomic.Bool
	release chan struct{}
}

func (g *gatedStore) ListAudit(ctx context.Context, q ladder.AuditQuery) ([]ladder.AuditRecord, error) {
	if g.armed.Load() && !q.Desc && q.AfterSeq >= gateAfterSeq {
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Store.ListAudit(ctx, q)
}

// TestAuditExportStreams reads the first records of an export while the
// server still waits to read the rest: the export is written as it
// is read, never built in memory first. An admin key of every workspace
// exports every workspace's records.
func TestAuditExportStreams(t *testing.T) {
	g := &gatedStore{release: make(chan struct{})}
	e := testenv.StartWith(t, "", testenv.Options{WrapStore: func(s ladder.Store) ladder.Store { g.Store = s; return g }})
	for i := range 520 {
		if res := e.Do("POST", "/v1/route", e.Keys[auditWS+"/agent"], map[string]any{"queue": "bills", "step": "read_bill", "item": fmt.Sprintf("S-%d", i)}); res.Status != http.StatusOK {
			t.Fatalf("route: %d %s", res.Status, res.Raw)
		}
	}
	_, all, err := e.Svc.CreateKey(t.Context(), "test", ladder.KeyRequest{Workspace: "*", Kind: ladder.KeyAdmin})
	if err != nil {
		t.Fatal(err)
	}
	g.armed.Store(true)
	// Without streaming the first line would wait for the gate: fail
	// instead of hanging.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.Server.URL+"/v1/audit/export", nil)
	req.Header.Set("Authorization", "Bearer "+all)
	resp, err := e.Server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range exportFlushLines {
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatalf("line %d before the second page was read: %v", i+1, err)
		}
	}
	close(g.release)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	total, err := ladder.VerifyAudit(t.Context(), e.Store)
	if err != nil {
		t.Fatal(err)
	}
	if got := int64(exportFlushLines + bytes.Count(rest, []byte("\n"))); got != total {
		t.Errorf("an export of every workspace has %d records, the log %d", got, total)
	}
}

// exportFlushLines is how many lines a client can read once the server has
// flushed its first batch; gateAfterSeq is past them, and before the end
// of the 533 records of TestAuditExportStreams.
const (
	exportFlushLines = 100
	gateAfterSeq     = 300
)

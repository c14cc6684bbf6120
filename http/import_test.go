package http_test

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
)

// importConfig has small thresholds so a few dozen reviews over two weeks
// move the step from shadow to propose.
const importConfig = `
workspaces:
  - id: acme
    queues:
      - id: pay
        steps:
          - id: pay_invoice
            name: Pay the invoice
            lane: shadow
            rules: {propose_min_weeks: 1, propose_min_n: 20, propose_lower: 0.75, auto_min_weeks: 4, auto_min_n: 300, auto_lower: 0.95}
          - id: post_bill
            name: Post the bill
            money_moving: true
            lane: auto
            audit_rate: 0.5
  - id: other
    queues:
      - id: q
        steps:
          - id: s
            name: Some step
            lane: shadow
`

// liveHistory records a history through the live API, the clock set to
// each event's time, and returns the same history as import rows: each
// review with the lane its item was routed in.
func liveHistory(t *testing.T, e *testenv.Env) []ladder.ImportRow {
	t.Helper()
	agent, human := e.Keys["acme/agent"], e.Keys["acme/human"]
	start := e.Clock.Now()
	var rows []ladder.ImportRow
	at := func(d time.Duration) string { return start.Add(d).UTC().Format(time.RFC3339) }
	routes := map[string]string{}
	lanes := map[string]string{}
	for i := range 64 {
		d := time.Duration(i+1) * 5 * time.Hour
		e.Clock.Advance(start.Add(d).Sub(e.Clock.Now()))
		item := fmt.Sprintf("INV-%d", i)
		switch {
		case i%7 == 3: // an outcome of an earlier item
			ok := i%21 != 3
			body := map[string]any{"step": "pay_invoice", "item": fmt.Sprintf("INV-%d", i-1), "handled_by": []string{"agent", "person"}[i%2], "ok": ok}
			if r := e.Do("POST", "/v1/outcomes", agent, body); r.Status/100 != 2 {
				t.Fatalf("outcome %d: %d %s", i, r.Status, r.Raw)
			}
			rows = append(rows, ladder.ImportRow{Type: "outcome", At: at(d), Step: "pay_invoice", Item: body["item"].(string), HandledBy: body["handled_by"].(string), OK: &ok})
		case i == 20: // a person overrules the verdict on INV-16
			prev := "INV-16"
			if r := e.Do("POST", "/v1/routes/"+routes[prev]+"/review", human, map[string]any{"verdict": "agree", "adjudication": true}); r.Status != 201 {
				t.Fatalf("adjudication: %d %s", r.Status, r.Raw)
			}
			rows = append(rows, ladder.ImportRow{Type: "review", At: at(d), Queue: "pay", Step: "pay_invoice", Item: prev, Lane: lanes[prev], Verdict: "agree", Adjudication: true})
		default:
			rt := e.Do("POST", "/v1/route", agent, map[string]any{"step": "pay_invoice", "item": item})
			if rt.Status != 200 {
				t.Fatalf("route %d: %d %s", i, rt.Status, rt.Raw)
			}
			routes[item], lanes[item] = rt.Body["route_id"].(string), rt.Body["lane"].(string)
			row := ladder.ImportRow{Type: "review", At: at(d), Queue: "pay", Step: "pay_invoice", Item: item, Lane: lanes[item], Verdict: "agree", Note: "checked"}
			body := map[string]any{"verdict": "agree", "note": "checked"}
			if i%15 == 2 || i == 16 {
				row.Verdict, row.Severity = "disagree", 2
				body["verdict"], body["severity"] = "disagree", 2
			}
			if i%10 == 5 {
				oe := i%20 == 5
				row.OperatorError, body["operator_error"] = &oe, oe
			}
			if r := e.Do("POST", "/v1/routes/"+routes[item]+"/review", human, body); r.Status != 201 {
				t.Fatalf("review %d: %d %s", i, r.Status, r.Raw)
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// liveAuditHistory records audits of a money-moving step in auto through
// the live API, one severity-1 failure among them (which doubles the audit
// rate and demotes the step to propose), then reviews in propose, and
// returns them as import rows.
func liveAuditHistory(t *testing.T, e *testenv.Env) []ladder.ImportRow {
	t.Helper()
	agent, human := e.Keys["acme/agent"], e.Keys["acme/human"]
	start := e.Clock.Now()
	var rows []ladder.ImportRow
	audits := 0
	for i := range 40 {
		d := time.Duration(i+1)*3*time.Hour + 30*time.Minute
		e.Clock.Advance(start.Add(d).Sub(e.Clock.Now()))
		item := fmt.Sprintf("BILL-%d", i)
		rt := e.Do("POST", "/v1/route", agent, map[string]any{"step": "post_bill", "item": item})
		if rt.Status != 200 {
			t.Fatalf("route %d: %d %s", i, rt.Status, rt.Raw)
		}
		lane := rt.Body["lane"].(string)
		if lane == "auto" && rt.Body["audit"] != true {
			continue // the agent acted alone and nobody checks this item
		}
		row := ladder.ImportRow{Type: "review", At: start.Add(d).UTC().Format(time.RFC3339), Step: "post_bill", Item: item, Lane: lane, Verdict: "agree"}
		body := map[string]any{"verdict": "agree"}
		if lane == "auto" {
			row.Type, row.Lane = "audit", ""
			if audits++; audits == 4 {
				row.Verdict, row.Severity = "disagree", 1
				body["verdict"], body["severity"] = "disagree", 1
			}
		}
		if r := e.Do("POST", "/v1/routes/"+rt.Body["route_id"].(string)+"/review", human, body); r.Status != 201 {
			t.Fatalf("review %d: %d %s", i, r.Status, r.Raw)
		}
		rows = append(rows, row)
	}
	return rows
}

func jsonl(t *testing.T, rows []ladder.ImportRow) string {
	t.Helper()
	var b strings.Builder
	for _, r := range rows {
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	return b.String()
}

func csvOf(t *testing.T, rows []ladder.ImportRow) string {
	t.Helper()
	var b strings.Builder
	w := csv.NewWriter(&b)
	header := []string{"type", "at", "queue", "step", "item", "lane", "verdict", "severity", "operator_error", "adjudication", "reviewer", "note", "handled_by", "ok"}
	_ = w.Write(header)
	for _, r := range rows {
		sev, oe, ok := "", "", ""
		if r.Severity != 0 {
			sev = strconv.Itoa(r.Severity)
		}
		if r.OperatorError != nil {
			oe = strconv.FormatBool(*r.OperatorError)
		}
		if r.OK != nil {
			ok = strconv.FormatBool(*r.OK)
		}
		_ = w.Write([]string{r.Type, r.At, r.Queue, r.Step, r.Item, r.Lane, r.Verdict, sev, oe, strconv.FormatBool(r.Adjudication), r.Reviewer, r.Note, r.HandledBy, ok})
	}
	w.Flush()
	return b.String()
}

// scrub drops what differs between two servers recording the same history:
// ids, key ids and the actors and reviewers named by them.
func scrub(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			if k == "id" || strings.HasSuffix(k, "_id") || k == "actor" || k == "reviewer" {
				continue
			}
			out[k] = scrub(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = scrub(val)
		}
		return out
	}
	return v
}

func evidenceOf(t *testing.T, e *testenv.Env, step ...string) map[string]any {
	t.Helper()
	path := "/v1/steps/pay/pay_invoice/evidence"
	if len(step) > 0 {
		path = "/v1/steps/pay/" + step[0] + "/evidence"
	}
	r := e.Do("GET", path, e.Keys["acme/human"], nil)
	if r.Status != 200 {
		t.Fatalf("evidence: %d %s", r.Status, r.Raw)
	}
	return scrub(r.Body).(map[string]any)
}

func importBody(t *testing.T, e *testenv.Env, key, query, contentType, body string) testenv.Response {
	t.Helper()
	return e.DoWith("POST", "/v1/import"+query, key, body, testenv.Header{Name: "Content-Type", Value: contentType})
}

// TestImportDecidesAsLiveReviews is the heart of the import: a history
// imported in one file ends with the same lane changes, figures, evidence
// packs and step states as the same reviews recorded one by one through
// the live API with the clock at each row's time — a step crossing
// shadow→propose (with an adjudication, operator errors and outcomes) and
// a money-moving step in auto whose severity-1 audit failure doubles its
// audit rate and demotes it, in JSON lines and in CSV.
func TestImportDecidesAsLiveReviews(t *testing.T) {
	live := testenv.Start(t, importConfig)
	rows := liveHistory(t, live)
	live.Clock.Advance(-live.Clock.Now().Sub(time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)))
	rows = append(rows, liveAuditHistory(t, live)...)
	live.Clock.Advance(14 * 24 * time.Hour) // past both histories
	want := evidenceOf(t, live)
	if lc, _ := want["lane_changes"].([]any); len(lc) == 0 {
		t.Fatalf("the live history moved no lane; the test needs a shadow→propose move: %v", want["lane_changes"])
	}
	wantAudit := evidenceOf(t, live, "post_bill")
	if lc, _ := wantAudit["lane_changes"].([]any); len(lc) == 0 {
		t.Fatalf("the live audits moved no lane; the test needs an auto→propose move: %v", wantAudit["lane_changes"])
	}
	wantState, err := live.Store.ListStepStates(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct{ name, contentType, body string }{
		{"jsonl", "application/x-ndjson", jsonl(t, rows)},
		{"csv", "text/csv", csvOf(t, rows)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			imp := testenv.Start(t, importConfig)
			r := importBody(t, imp, imp.Keys["acme/admin"], "", tt.contentType, tt.body)
			if r.Status != 200 {
				t.Fatalf("import: %d %s", r.Status, r.Raw)
			}
			imp.Clock.Advance(live.Clock.Now().Sub(imp.Clock.Now()))
			if diff := cmp.Diff(want, evidenceOf(t, imp)); diff != "" {
				t.Errorf("evidence pack after import (-live +imported):\n%s", diff)
			}
			if diff := cmp.Diff(wantAudit, evidenceOf(t, imp, "post_bill")); diff != "" {
				t.Errorf("post_bill evidence pack after import (-live +imported):\n%s", diff)
			}
			got, err := imp.Store.ListStepStates(t.Context(), "acme")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantState, got); diff != "" {
				t.Errorf("step state after import (-live +imported):\n%s", diff)
			}
			steps := r.Body["steps"].([]any)
			s := steps[0].(map[string]any)
			if s["lane"] != "propose" || len(s["lane_changes"].([]any)) != 1 || s["outcomes"].(float64) != 9 {
				t.Errorf("summary: %s", r.Raw)
			}
			if a := steps[1].(map[string]any); a["audits"].(float64) < 4 || a["lane"] != "propose" {
				t.Errorf("post_bill summary: %v", a)
			}
			recs, err := imp.Store.ListAudit(t.Context(), ladder.AuditQuery{Workspace: "acme", Kind: ladder.AuditHistoryImport})
			if err != nil || len(recs) != 1 {
				t.Fatalf("history.import audit records: %d, %v", len(recs), err)
			}
		})
	}
}

// TestImportRefusesBadRows: every bad row is named by its line and field,
// and nothing of the file is written.
func TestImportRefusesBadRows(t *testing.T) {
	e := testenv.Start(t, importConfig)
	admin := e.Keys["acme/admin"]
	body := strings.Join([]string{
		`{"type":"review","at":"2026-09-02T10:00:00Z","step":"pay_invoice","item":"A","lane":"shadow","verdict":"agree"}`,
		`{"type":"review","at":"yesterday","step":"pay_invoice","item":"B","lane":"shadow","verdict":"agree"}`,
		``,
		`{"type":"review","at":"2026-09-02T11:00:00Z","step":"pay_invoice","item":"C","lane":"shadow","verdict":"maybe"}`,
		`{"type":"review","at":"2026-09-02T12:00:00Z","step":"pay_invoice","item":"D","lane":"shadow","verdict":"agree","colour":"red"}`,
		`{"type":"review","at":"2026-09-02T13:00:00Z","step":"no_such_step","item":"E","lane":"shadow","verdict":"agree"}`,
		`{"type":"review","at":"2026-09-02T14:00:00Z","step":"pay_invoice","item":"Z","lane":"shadow","verdict":"agree","adjudication":true}`,
	}, "\n")
	r := importBody(t, e, admin, "", "application/x-ndjson", body)
	if r.Status != 400 || r.ErrorCode() != "INVALID_ARGUMENT" {
		t.Fatalf("bad rows: %d %s", r.Status, r.Raw)
	}
	type badRow struct {
		Line  int    `json:"line"`
		Field string `json:"field"`
	}
	var got struct {
		Error struct {
			Data struct {
				Rows []badRow `json:"rows"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Raw, &got); err != nil {
		t.Fatal(err)
	}
	want := []badRow{{2, "at"}, {4, "verdict"}, {5, "colour"}, {6, "step"}}
	if diff := cmp.Diff(want, got.Error.Data.Rows); diff != "" {
		t.Errorf("bad rows (-want +got):\n%s", diff)
	}
	// The adjudication with nothing to overrule is found while replaying,
	// once the rest of the file is good; the earlier row is not kept.
	good := strings.Join([]string{
		`{"type":"review","at":"2026-09-02T10:00:00Z","step":"pay_invoice","item":"A","lane":"shadow","verdict":"agree"}`,
		`{"type":"review","at":"2026-09-02T14:00:00Z","step":"pay_invoice","item":"Z","lane":"shadow","verdict":"agree","adjudication":true}`,
	}, "\n")
	r = importBody(t, e, admin, "", "application/x-ndjson", good)
	if r.Status != 400 || !strings.Contains(string(r.Raw), `"line":2`) || !strings.Contains(string(r.Raw), `"field":"adjudication"`) {
		t.Fatalf("adjudication without a review: %d %s", r.Status, r.Raw)
	}
	ev := evidenceOf(t, e)
	if n := ev["figures"].(map[string]any)["rolling_4"].(map[string]any)["n"]; n != 0.0 {
		t.Errorf("a refused import wrote reviews: rolling_4 n = %v", n)
	}
	recs, err := e.Store.ListAudit(t.Context(), ladder.AuditQuery{Workspace: "acme", Kind: ladder.AuditReview})
	if err != nil || len(recs) != 0 {
		t.Errorf("a refused import left %d review records (%v)", len(recs), err)
	}
}

// TestImportKeys: only admin keys import; a workspace's admin key imports
// into its workspace only, and an all-workspaces key names one.
func TestImportKeys(t *testing.T) {
	e := testenv.Start(t, importConfig)
	row := `{"type":"review","at":"2026-09-02T10:00:00Z","step":"pay_invoice","item":"A","lane":"shadow","verdict":"agree"}`
	for _, kind := range []string{"agent", "human"} {
		if r := importBody(t, e, e.Keys["acme/"+kind], "", "application/x-ndjson", row); r.Status != 403 {
			t.Errorf("%s key: %d %s", kind, r.Status, r.Raw)
		}
	}
	if r := importBody(t, e, e.Keys["acme/admin"], "?workspace=other", "application/x-ndjson", row); r.Status != 403 || r.ErrorCode() != "WORKSPACE_REFUSED" {
		t.Errorf("another workspace: %d %s", r.Status, r.Raw)
	}
	_, all, err := e.Svc.CreateKey(t.Context(), "test", ladder.KeyRequest{Workspace: "*", Kind: ladder.KeyAdmin})
	if err != nil {
		t.Fatal(err)
	}
	if r := importBody(t, e, all, "", "application/x-ndjson", row); r.Status != 400 || !strings.Contains(string(r.Raw), `"field":"workspace"`) {
		t.Errorf("all-workspaces key without ?workspace=: %d %s", r.Status, r.Raw)
	}
	if r := importBody(t, e, all, "?workspace=acme", "application/json", row); r.Status != 415 || r.ErrorCode() != "UNSUPPORTED_MEDIA_TYPE" {
		t.Errorf("JSON content type: %d %s", r.Status, r.Raw)
	}
	if r := importBody(t, e, all, "?workspace=acme", "application/x-ndjson", row); r.Status != 200 {
		t.Errorf("all-workspaces key with ?workspace=: %d %s", r.Status, r.Raw)
	}
	// Rows start where the step's record ends: one older than the review
	// just imported is refused.
	older := `{"type":"review","at":"2026-09-02T09:00:00Z","step":"pay_invoice","item":"B","lane":"shadow","verdict":"agree"}`
	if r := importBody(t, e, e.Keys["acme/admin"], "", "text/plain", older+"\n"); r.Status != 415 {
		t.Errorf("text/plain: %d %s", r.Status, r.Raw)
	}
	if r := importBody(t, e, e.Keys["acme/admin"], "?format=jsonl", "text/plain", older); r.Status != 400 || !strings.Contains(string(r.Raw), `"field":"at"`) || !strings.Contains(string(r.Raw), "older than the step's latest record") {
		t.Errorf("a row older than the record: %d %s", r.Status, r.Raw)
	}
}

package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ladderhq/ladder"
)

// testAuditFilters checks every AuditQuery filter (actor, queue and step,
// since and until, alone and together with workspace and kind), in both
// directions, against a model computed from the appended entries.
func testAuditFilters(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	actors := []string{"key-1", "key-2", "system"}
	steps := []struct{ queue, step string }{{"bills", "post_tms"}, {"bills", "read_bill"}, {"loads", "post_tms"}, {"", ""}}
	type row struct {
		seq             int64
		ws, kind, actor string
		queue, step     string
		at              time.Time
	}
	var (
		entries []ladder.AuditEntry
		model   []row
	)
	for i := 1; i <= 48; i++ {
		ws, kind := wsA, ladder.AuditRoute
		switch {
		case i%7 == 0:
			ws = wsB
		case i%10 == 5:
			// A third workspace, so a kind across workspaces (a
			// read per workspace, merged) interleaves three.
			ws = wsC
		}
		if i%5 == 0 {
			kind = ladder.AuditReview
		}
		actor, st := actors[i%len(actors)], steps[i%len(steps)]
		at := t0.Add(time.Duration(i) * time.Hour)
		var data any = map[string]any{"queue": st.queue, "step": st.step, "item": fmt.Sprint(i)}
		switch {
		case st.step == "" && i%2 == 0:
			data = nil // names no step
		case st.step == "":
			data = map[string]any{"queue": 7, "step": []string{"x"}} // not strings: no step
		}
		e := must(ladder.NewAuditEntry(ws, actor, kind, fmt.Sprint(i), at, data))
		entries = append(entries, e)
		model = append(model, row{seq: int64(i), ws: ws, kind: kind, actor: actor, queue: st.queue, step: st.step, at: e.At})
	}
	must(s.AppendAudit(ctx, entries[:30]...))
	must(s.AppendAudit(ctx, entries[30:]...))

	// A step filter needs no column of its own in the record: what the
	// store keeps beside it is what AuditStepOf reads from its data.
	for _, r := range must(s.ListAudit(ctx, ladder.AuditQuery{Limit: 100})) {
		q, st := ladder.AuditStepOf(r.Data)
		if m := model[r.Seq-1]; q != m.queue || st != m.step {
			t.Errorf("record %d: AuditStepOf = %q/%q, want %q/%q", r.Seq, q, st, m.queue, m.step)
		}
	}

	match := func(q ladder.AuditQuery, r row) bool {
		return (q.Workspace == "" || r.ws == q.Workspace) && (q.Kind == "" || r.kind == q.Kind) &&
			(q.Actor == "" || r.actor == q.Actor) && (q.Queue == "" || r.queue == q.Queue) && (q.Step == "" || r.step == q.Step) &&
			(q.Since.IsZero() || !r.at.Before(q.Since)) && (q.Until.IsZero() || r.at.Before(q.Until))
	}
	want := func(q ladder.AuditQuery) []int64 {
		var out []int64
		limit := ladder.PageLimit(q.Limit)
		if q.Desc {
			for i := len(model) - 1; i >= 0 && len(out) < limit; i-- {
				if (q.BeforeSeq == 0 || model[i].seq < q.BeforeSeq) && match(q, model[i]) {
					out = append(out, model[i].seq)
				}
			}
			return out
		}
		for _, r := range model {
			if len(out) < limit && r.seq > q.AfterSeq && match(q, r) {
				out = append(out, r.seq)
			}
		}
		return out
	}
	since, until := t0.Add(10*time.Hour), t0.Add(30*time.Hour)
	for _, tc := range []struct {
		name string
		q    ladder.AuditQuery
	}{
		{"actor", ladder.AuditQuery{Actor: "key-2"}},
		{"actor unknown", ladder.AuditQuery{Actor: "key-9"}},
		{"step in any queue", ladder.AuditQuery{Step: "post_tms"}},
		{"queue and step", ladder.AuditQuery{Queue: "bills", Step: "post_tms"}},
		{"queue alone", ladder.AuditQuery{Queue: "bills"}},
		{"step unknown", ladder.AuditQuery{Step: "nope"}},
		{"since (inclusive)", ladder.AuditQuery{Since: since}},
		{"until (exclusive)", ladder.AuditQuery{Until: until}},
		{"since and until", ladder.AuditQuery{Since: since, Until: until}},
		{"empty window", ladder.AuditQuery{Since: until, Until: since}},
		{"every filter", ladder.AuditQuery{Workspace: wsA, Kind: ladder.AuditRoute, Actor: "key-1", Queue: "bills", Step: "post_tms", Since: since, Until: t0.Add(48 * time.Hour)}},
		{"every filter desc", ladder.AuditQuery{Workspace: wsA, Kind: ladder.AuditRoute, Actor: "key-1", Step: "post_tms", Since: since, Until: t0.Add(48 * time.Hour), Desc: true}},
		{"workspace and actor desc", ladder.AuditQuery{Workspace: wsB, Actor: "system", Desc: true}},
		{"workspace and step desc before seq", ladder.AuditQuery{Workspace: wsA, Step: "read_bill", Desc: true, BeforeSeq: 30, Limit: 3}},
		{"kind and since after seq", ladder.AuditQuery{Kind: ladder.AuditReview, Since: since, AfterSeq: 20, Limit: 2}},
		{"actor and until desc", ladder.AuditQuery{Actor: "key-1", Until: until, Desc: true, Limit: 4}},
		{"kind across workspaces", ladder.AuditQuery{Kind: ladder.AuditReview}},
		{"kind across workspaces after seq", ladder.AuditQuery{Kind: ladder.AuditReview, AfterSeq: 12, Limit: 2}},
		{"kind across workspaces desc", ladder.AuditQuery{Kind: ladder.AuditReview, Desc: true, Limit: 4}},
		{"kind across workspaces desc before seq", ladder.AuditQuery{Kind: ladder.AuditReview, Desc: true, BeforeSeq: 35, Limit: 3}},
		{"kind and actor across workspaces", ladder.AuditQuery{Kind: ladder.AuditRoute, Actor: "system"}},
		{"kind and step across workspaces desc", ladder.AuditQuery{Kind: ladder.AuditReview, Step: "post_tms", Desc: true}},
		{"kind and window across workspaces", ladder.AuditQuery{Kind: ladder.AuditReview, Since: since, Until: until}},
		{"kind no record has", ladder.AuditQuery{Kind: ladder.AuditKeyCreate}},
	} {
		got := seqs(must(s.ListAudit(ctx, tc.q)))
		if diff := cmp.Diff(want(tc.q), got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ListAudit %s %+v: seqs (-want +got):\n%s", tc.name, tc.q, diff)
		}
	}
	if n := len(want(ladder.AuditQuery{Workspace: wsA, Kind: ladder.AuditRoute, Actor: "key-1", Queue: "bills", Step: "post_tms", Since: since, Until: t0.Add(48 * time.Hour)})); n == 0 {
		t.Errorf("the every-filter case matches nothing; the test data no longer covers it")
	}

	// Paging a kind across workspaces one to three records at a time, in
	// both directions, lists each record once and in order: each page's
	// merge stops at its limit and the next page starts past it.
	for _, kind := range []string{ladder.AuditReview, ladder.AuditRoute} {
		for _, desc := range []bool{false, true} {
			full := want(ladder.AuditQuery{Kind: kind, Desc: desc, Limit: len(model)})
			for size := 1; size <= 3; size++ {
				var got []int64
				q := ladder.AuditQuery{Kind: kind, Desc: desc, Limit: size}
				for range len(model) {
					page := seqs(must(s.ListAudit(ctx, q)))
					if len(page) > size {
						t.Fatalf("kind %s desc=%v: a page of %d records for limit %d", kind, desc, len(page), size)
					}
					got = append(got, page...)
					if len(page) < size {
						break
					}
					q.AfterSeq, q.BeforeSeq = page[len(page)-1], page[len(page)-1]
				}
				if diff := cmp.Diff(full, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("kind %s desc=%v paged by %d: seqs (-want +got):\n%s", kind, desc, size, diff)
				}
			}
		}
	}
	reviewed := map[string]bool{}
	for _, r := range model {
		if r.kind == ladder.AuditReview {
			reviewed[r.ws] = true
		}
	}
	if len(reviewed) < 3 {
		t.Errorf("reviews are in %d workspaces; the kind-across-workspaces cases need three", len(reviewed))
	}
}

// AuditPlanRecords appends 4,000 records as a server writes them: most name no
// step (capability calls and results), one in five names one of many rare
// steps (routes), one in 97 is an approval (a rare kind): the data the
// stores' query-plan tests read their plans on.
func AuditPlanRecords(t *testing.T, s ladder.AuditStore) {
	t.Helper()
	var entries []ladder.AuditEntry
	for i := range 4000 {
		var data any = map[string]any{"call": i}
		kind := []string{ladder.AuditCall, ladder.AuditCallResult}[i/2%2]
		switch {
		case i%5 == 0:
			data, kind = map[string]any{"queue": "bills", "step": fmt.Sprint("s", i%400)}, ladder.AuditRoute
		case i%97 == 1:
			kind = ladder.AuditApproval
		}
		e, err := ladder.NewAuditEntry([]string{"ws-a", "ws-b"}[i%2], "k1", kind, "x", time.Now(), data)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	for i := 0; i < len(entries); i += 500 {
		if _, err := s.AppendAudit(t.Context(), entries[i:i+500]...); err != nil {
			t.Fatal(err)
		}
	}
}

// StepFilterQueries are step and queue filters over AuditPlanRecords' data
// that each match some records: a store's test of a migration touching
// the step index lists them before and after it.
func StepFilterQueries() []ladder.AuditQuery {
	return []ladder.AuditQuery{
		{Workspace: "ws-a", Step: "s0"},
		{Workspace: "ws-a", Queue: "bills", Step: "s0", Desc: true, BeforeSeq: 2000},
		{Step: "s10", Queue: "bills"},
		{Workspace: "ws-b", Queue: "bills"},
	}
}

// ListEach returns s's records for each query, failing t on an error or a
// query that matches nothing (the data no longer covers it).
func ListEach(t *testing.T, s ladder.AuditStore, queries []ladder.AuditQuery) [][]ladder.AuditRecord {
	t.Helper()
	var got [][]ladder.AuditRecord
	for _, q := range queries {
		recs, err := s.ListAudit(t.Context(), q)
		if err != nil || len(recs) == 0 {
			t.Fatalf("ListAudit %+v: %d records, %v; the test data no longer covers it", q, len(recs), err)
		}
		got = append(got, recs)
	}
	return got
}

// SameListings fails t unless s lists want[i] for queries[i]; when names
// the moment checked (say, "after 0016").
func SameListings(t *testing.T, s ladder.AuditStore, queries []ladder.AuditQuery, want [][]ladder.AuditRecord, when string) {
	t.Helper()
	for i, q := range queries {
		got, err := s.ListAudit(t.Context(), q)
		if err != nil {
			t.Fatalf("%s: ListAudit %+v: %v", when, q, err)
		}
		if diff := cmp.Diff(want[i], got); diff != "" {
			t.Errorf("%s: ListAudit %+v (-want +got):\n%s", when, q, diff)
		}
	}
}

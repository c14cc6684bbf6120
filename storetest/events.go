package storetest

import (
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
)

// eventTests exercise the outbox (EventStore) and the events that writes
// carry.
var eventTests = []struct {
	name string
	fn   func(t *testing.T, s ladder.Store)
}{
	{"OutboxWrittenWithTheChange", testOutboxWithChange},
	{"OutboxExpiryEvent", testOutboxExpiry},
	{"DeliveryLifecycle", testDeliveryLifecycle},
	{"DeliveryClaimedOnce", testDeliveryClaimedOnce},
	{"DeliveriesRetired", testDeliveriesRetired},
	{"DeliveriesPruned", testDeliveriesPruned},
}

// everyone sends every event to two endpoints.
func everyone(ladder.Event) []string { return []string{"ws-a/one", "ws-a/two"} }

func eventEntry(t *testing.T, subject string) ladder.AuditEntry {
	e := entry(t, wsA, ladder.AuditLaneChange, subject, t0, map[string]any{"step": "post_tms"})
	e.Event = ladder.LaneChangedEvent(ladder.LaneChange{ID: subject, Workspace: wsA, Queue: "bills", Step: "post_tms", At: t0,
		From: ladder.LaneShadow, To: ladder.LanePropose, Rule: "promote", Numbers: map[string]float64{"n": 200}})
	return e
}

func testOutboxWithChange(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	e := eventEntry(t, "lc_1")
	must(s.AppendAudit(ctx, e))
	// A write that fails writes no event: the review's route is unknown,
	// so its audit entry, and the event it carries, never commit.
	failed := eventEntry(t, "lc_failed")
	_, _, err := s.RecordReview(ctx, ladder.ReviewWrite{Review: ladder.Review{ID: "rv_x", RouteID: "nope", Workspace: wsA, At: t0}, Audit: failed})
	wantErr(t, "RecordReview of an unknown route", err, ladder.ErrNotFound)

	if n := must(s.FanOut(ctx, 100, everyone)); n != 1 {
		t.Fatalf("FanOut took %d events, want 1 (the committed change's only)", n)
	}
	if n := must(s.FanOut(ctx, 100, everyone)); n != 0 {
		t.Fatalf("second FanOut took %d events, want 0: an event is fanned out once", n)
	}
	got := must(s.ClaimDeliveries(ctx, 10, time.Minute, map[string]int{"ws-a/one": 5, "ws-a/two": 5}))
	if len(got) != 2 {
		t.Fatalf("claimed %d deliveries, want 2 (one per endpoint)", len(got))
	}
	for _, d := range got {
		if diff := cmp.Diff(e.Event, d.Event); diff != "" {
			t.Errorf("delivery %s to %s carries (-want +got):\n%s", d.ID, d.Endpoint, diff)
		}
		if d.EventID != e.Event.ID || d.Status != ladder.DeliveryPending || d.Attempts != 0 || d.Workspace != wsA {
			t.Errorf("delivery %+v", d)
		}
	}
}

func testOutboxExpiry(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	a := approval("ap_exp", wsA, "")
	a.CreatedAt, a.ExpiresAt = time.Now(), time.Now().Add(time.Millisecond)
	must2(s.CreateApproval(ctx, a, entry(t, wsA, ladder.AuditApproval, a.ID, t0, nil)))
	time.Sleep(20 * time.Millisecond)
	if got := must(s.GetApproval(ctx, wsA, a.ID)); got.Status != ladder.ApprovalExpired {
		t.Fatalf("status %s, want expired", got.Status)
	}
	must(s.GetApproval(ctx, wsA, a.ID)) // read again: expired once, one event
	must(s.FanOut(ctx, 100, func(ladder.Event) []string { return []string{"ep"} }))
	got := must(s.ClaimDeliveries(ctx, 10, time.Minute, map[string]int{"ep": 10}))
	if len(got) != 1 || got[0].Event.Type != ladder.EventApprovalExpired || got[0].Event.Data.ApprovalID != a.ID || got[0].Event.Data.Link != "/console/approvals/ap_exp" {
		t.Fatalf("deliveries after the expiry: %+v, want one approval.expired of %s", got, a.ID)
	}
}

func testDeliveryLifecycle(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	for _, id := range []string{"lc_1", "lc_2", "lc_3"} {
		must(s.AppendAudit(ctx, eventEntry(t, id)))
	}
	one := func(ladder.Event) []string { return []string{"ep"} }
	must(s.FanOut(ctx, 100, one))
	// The endpoint's slots cap the claim.
	first := must(s.ClaimDeliveries(ctx, 10, time.Minute, map[string]int{"ep": 1}))
	if len(first) != 1 {
		t.Fatalf("claimed %d with one slot, want 1", len(first))
	}
	d := first[0]
	// Leased: nobody else claims it; the other two are free.
	rest := must(s.ClaimDeliveries(ctx, 10, time.Minute, map[string]int{"ep": 10}))
	if len(rest) != 2 || rest[0].ID == d.ID || rest[1].ID == d.ID {
		t.Fatalf("second claim %v, want the two others", ids(rest))
	}
	check(t, s.FinishDelivery(ctx, ladder.DeliveryResult{ID: d.ID, Error: "HTTP 500", StatusCode: 500}))
	again := must(s.ClaimDeliveries(ctx, 10, time.Minute, map[string]int{"ep": 10}))
	if len(again) != 1 || again[0].ID != d.ID || again[0].Attempts != 1 || again[0].LastError != "HTTP 500" || again[0].LastStatus != 500 {
		t.Fatalf("claim after a failed try: %+v, want %s with one attempt", again, d.ID)
	}
	check(t, s.FinishDelivery(ctx, ladder.DeliveryResult{ID: d.ID, Dead: true, Error: "HTTP 503", StatusCode: 503}))
	check(t, s.FinishDelivery(ctx, ladder.DeliveryResult{ID: rest[0].ID, Delivered: true, StatusCode: 204}))
	check(t, s.FinishDelivery(ctx, ladder.DeliveryResult{ID: rest[1].ID, Error: "timeout", RetryIn: time.Hour}))
	if got := must(s.ClaimDeliveries(ctx, 10, time.Minute, map[string]int{"ep": 10})); len(got) != 0 {
		t.Fatalf("claimed %v: a dead, a delivered and a delivery due in an hour are not due", ids(got))
	}
	st := must(s.DeliveryStats(ctx))
	if st.Pending != 1 || st.Retrying != 1 || st.Delivered != 1 || st.Dead != 1 || st.OldestPending <= 0 {
		t.Errorf("stats %+v, want one each of pending (retrying), delivered, dead", st)
	}

	list := must(s.ListDeliveries(ctx, ladder.DeliveryQuery{Workspace: wsA}))
	byID := map[string]ladder.Delivery{}
	for _, x := range list {
		byID[x.ID] = x
	}
	if len(list) != 3 || byID[d.ID].Status != ladder.DeliveryDead || byID[d.ID].Attempts != 2 ||
		byID[rest[0].ID].Status != ladder.DeliveryDelivered || byID[rest[0].ID].DeliveredAt == nil {
		t.Fatalf("ListDeliveries: %+v", list)
	}
	if list[0].Seq < list[1].Seq {
		t.Errorf("ListDeliveries not newest first")
	}
	page := must(s.ListDeliveries(ctx, ladder.DeliveryQuery{Workspace: wsA, Limit: 1, BeforeSeq: list[0].Seq}))
	if len(page) != 1 || page[0].ID != list[1].ID {
		t.Errorf("second page %v, want %s", ids(page), list[1].ID)
	}
	dead := must(s.ListDeliveries(ctx, ladder.DeliveryQuery{Workspace: wsA, Status: ladder.DeliveryDead}))
	if len(dead) != 1 || dead[0].ID != d.ID {
		t.Errorf("dead deliveries %v, want %s", ids(dead), d.ID)
	}
	if other := must(s.ListDeliveries(ctx, ladder.DeliveryQuery{Workspace: wsB})); len(other) != 0 {
		t.Errorf("another workspace sees %v", ids(other))
	}
	_, err := s.Redeliver(ctx, wsB, d.ID)
	wantErr(t, "Redeliver from another workspace", err, ladder.ErrNotFound)

	re := must(s.Redeliver(ctx, wsA, d.ID))
	if re.Status != ladder.DeliveryPending || re.Attempts != 0 {
		t.Errorf("redelivered: %+v", re)
	}
	got := must(s.ClaimDeliveries(ctx, 10, time.Minute, map[string]int{"ep": 10}))
	if len(got) != 1 || got[0].ID != d.ID || got[0].EventID != d.EventID {
		t.Fatalf("claim after Redeliver: %v, want %s with the same event id", ids(got), d.ID)
	}
}

// testDeliveryClaimedOnce claims from many goroutines at once: each
// delivery goes to exactly one of them.
func testDeliveryClaimedOnce(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	const events = 40
	for i := range events {
		must(s.AppendAudit(ctx, eventEntry(t, "lc_"+string(rune('A'+i)))))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]int{}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 30 {
				if _, err := s.FanOut(ctx, 5, func(ladder.Event) []string { return []string{"ep"} }); err != nil {
					t.Error(err)
					return
				}
				got, err := s.ClaimDeliveries(ctx, 3, time.Minute, map[string]int{"ep": 3})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, d := range got {
					seen[d.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if n := must(s.FanOut(ctx, 100, func(ladder.Event) []string { return []string{"ep"} })); n != 0 {
		t.Errorf("%d events left to fan out", n)
	}
	rest := must(s.ClaimDeliveries(ctx, 100, time.Minute, map[string]int{"ep": 100}))
	for _, d := range rest {
		seen[d.ID]++
	}
	var twice []string
	for id, n := range seen {
		if n != 1 {
			twice = append(twice, id)
		}
	}
	sort.Strings(twice)
	if len(seen) != events || len(twice) != 0 {
		t.Fatalf("%d deliveries claimed, want %d, each once; claimed more than once: %v", len(seen), events, twice)
	}
}

func ids(ds []ladder.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

// testDeliveriesRetired: the pending deliveries of an endpoint no longer
// configured become dead with the reason, visible and counted; delivered
// ones and those of configured endpoints stay as they are.
func testDeliveriesRetired(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	for _, id := range []string{"lc_r1", "lc_r2"} {
		must(s.AppendAudit(ctx, eventEntry(t, id)))
	}
	must(s.FanOut(ctx, 100, everyone))
	two := must(s.ClaimDeliveries(ctx, 1, time.Minute, map[string]int{"ws-a/two": 1}))
	if len(two) != 1 {
		t.Fatalf("claimed %d, want 1", len(two))
	}
	check(t, s.FinishDelivery(ctx, ladder.DeliveryResult{ID: two[0].ID, Delivered: true, StatusCode: 200}))

	got := must(s.RetireDeliveries(ctx, []string{"ws-a/one"}, ladder.EndpointRemoved))
	if diff := cmp.Diff(map[string]int{"ws-a/two": 1}, got); diff != "" {
		t.Fatalf("retired (-want +got):\n%s", diff)
	}
	if again := must(s.RetireDeliveries(ctx, []string{"ws-a/one"}, ladder.EndpointRemoved)); len(again) != 0 {
		t.Errorf("retired again: %v, want none", again)
	}
	counts := map[string]int{}
	for _, d := range must(s.ListDeliveries(ctx, ladder.DeliveryQuery{Workspace: wsA})) {
		counts[d.Endpoint+" "+string(d.Status)+" "+d.LastError]++
	}
	wantCounts := map[string]int{
		"ws-a/one pending ":                       2,
		"ws-a/two delivered ":                     1,
		"ws-a/two dead " + ladder.EndpointRemoved: 1,
	}
	if diff := cmp.Diff(wantCounts, counts); diff != "" {
		t.Errorf("deliveries after retiring ws-a/two (-want +got):\n%s", diff)
	}
	if st := must(s.DeliveryStats(ctx)); st.Pending != 2 || st.Dead != 1 || st.Delivered != 1 {
		t.Errorf("stats %+v, want 2 pending, 1 dead, 1 delivered", st)
	}
	if got := must(s.ClaimDeliveries(ctx, 10, time.Minute, map[string]int{"ws-a/two": 10})); len(got) != 0 {
		t.Errorf("claimed retired deliveries %v", ids(got))
	}
	if got := must(s.RetireDeliveries(ctx, nil, ladder.EndpointRemoved)); !cmp.Equal(got, map[string]int{"ws-a/one": 2}) {
		t.Errorf("retired with no endpoint configured: %v, want ws-a/one's 2", got)
	}
}

// testDeliveriesPruned: delivered deliveries older than the cut go in
// bounded batches, then events left with no delivery; pending and dead
// deliveries and their events stay, and a dead one can still be
// redelivered.
func testDeliveriesPruned(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	for _, id := range []string{"lc_p1", "lc_p2", "lc_p3", "lc_p4"} {
		must(s.AppendAudit(ctx, eventEntry(t, id)))
	}
	must(s.FanOut(ctx, 100, func(ladder.Event) []string { return []string{"ep"} }))
	must(s.AppendAudit(ctx, eventEntry(t, "lc_nobody")))
	must(s.FanOut(ctx, 100, func(ladder.Event) []string { return nil }))
	got := must(s.ClaimDeliveries(ctx, 10, time.Minute, map[string]int{"ep": 10}))
	if len(got) != 4 {
		t.Fatalf("claimed %d, want 4", len(got))
	}
	check(t, s.FinishDelivery(ctx, ladder.DeliveryResult{ID: got[0].ID, Delivered: true, StatusCode: 200}))
	check(t, s.FinishDelivery(ctx, ladder.DeliveryResult{ID: got[1].ID, Delivered: true, StatusCode: 200}))
	check(t, s.FinishDelivery(ctx, ladder.DeliveryResult{ID: got[2].ID, Dead: true, Error: "HTTP 500", StatusCode: 500}))
	check(t, s.FinishDelivery(ctx, ladder.DeliveryResult{ID: got[3].ID, Error: "HTTP 500", StatusCode: 500, RetryIn: time.Hour}))

	if n := must(s.PruneDeliveries(ctx, t0.Add(-time.Hour), 10)); n != 0 {
		t.Fatalf("pruned %d rows older than everything, want 0", n)
	}
	later := time.Now().Add(time.Hour)
	// One delivery and one event per batch of one.
	if n := must(s.PruneDeliveries(ctx, later, 1)); n != 2 {
		t.Fatalf("first batch of 1 pruned %d rows, want 2 (a delivery, an event)", n)
	}
	// The other delivered one, then the two events left with none.
	if n := must(s.PruneDeliveries(ctx, later, 10)); n != 3 {
		t.Fatalf("second batch pruned %d rows, want 3", n)
	}
	if n := must(s.PruneDeliveries(ctx, later, 10)); n != 0 {
		t.Fatalf("third batch pruned %d rows, want 0", n)
	}
	left := map[string]ladder.DeliveryStatus{}
	for _, d := range must(s.ListDeliveries(ctx, ladder.DeliveryQuery{Workspace: wsA})) {
		left[d.ID] = d.Status
	}
	if diff := cmp.Diff(map[string]ladder.DeliveryStatus{got[2].ID: ladder.DeliveryDead, got[3].ID: ladder.DeliveryPending}, left); diff != "" {
		t.Fatalf("deliveries after pruning (-want +got):\n%s", diff)
	}
	if st := must(s.DeliveryStats(ctx)); st.Delivered != 0 || st.Dead != 1 || st.Pending != 1 {
		t.Errorf("stats after pruning %+v", st)
	}
	must(s.Redeliver(ctx, wsA, got[2].ID))
	again := must(s.ClaimDeliveries(ctx, 10, time.Minute, map[string]int{"ep": 10}))
	if len(again) != 1 || again[0].ID != got[2].ID || again[0].Event == nil || again[0].Event.ID != got[2].EventID {
		t.Fatalf("claim of the redelivered dead letter after pruning: %+v", again)
	}
}

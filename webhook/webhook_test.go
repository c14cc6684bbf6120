package webhook_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/sqlite"
	"github.com/ladderhq/ladder/webhook"
)

// TestSignRotation: while a secret rotates, a message carries two
// signatures and a receiver holding either key verifies it; a changed
// body, another key, or an old timestamp does not verify.
func TestSignRotation(t *testing.T) {
	newKey, oldKey := []byte("0123456789abcdef0123456789abcdef"), []byte("fedcba9876543210fedcba9876543210")
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"type":"approval.requested"}`)
	sig := webhook.Sign([][]byte{newKey, oldKey}, "evt_1", now, body)
	if parts := strings.Fields(sig); len(parts) != 2 || !strings.HasPrefix(parts[0], "v1,") {
		t.Fatalf("signature %q: want two v1 signatures", sig)
	}
	for name, key := range map[string][]byte{"new": newKey, "old": oldKey} {
		if err := webhook.Verify(key, "evt_1", "1800000000", sig, body, now.Add(time.Minute)); err != nil {
			t.Errorf("%s key: %v", name, err)
		}
	}
	for name, check := range map[string]error{
		"other body":  webhook.Verify(newKey, "evt_1", "1800000000", sig, []byte(`{}`), now),
		"other id":    webhook.Verify(newKey, "evt_2", "1800000000", sig, body, now),
		"other key":   webhook.Verify([]byte("another key of thirty-two bytes!"), "evt_1", "1800000000", sig, body, now),
		"six minutes": webhook.Verify(newKey, "evt_1", "1800000000", sig, body, now.Add(6*time.Minute)),
	} {
		if check == nil {
			t.Errorf("%s verified", name)
		}
	}
	if _, err := webhook.ParseSecret("whsec_" + base64.StdEncoding.EncodeToString(newKey)); err != nil {
		t.Errorf("ParseSecret: %v", err)
	}
	for _, bad := range []string{"", "secret", "whsec_!!!", "whsec_" + base64.StdEncoding.EncodeToString([]byte("short"))} {
		if _, err := webhook.ParseSecret(bad); err == nil {
			t.Errorf("ParseSecret(%q) accepted", bad)
		}
	}
}

// TestDispatcher: events committed to the store reach the endpoints that
// want them, signed, retried after failures, at most max_in_flight at a
// time, and a delivery that fails every try is dead.
func TestDispatcher(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "l.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key := []byte("0123456789abcdef0123456789abcdef")
	var (
		mu        sync.Mutex
		tries     = map[string]int{}
		inFlight  int
		maxFlight int
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get("webhook-id")
		mu.Lock()
		tries[id]++
		n := tries[id]
		inFlight++
		maxFlight = max(maxFlight, inFlight)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		if err := webhook.Verify(key, id, r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature"), body, time.Now()); err != nil {
			t.Errorf("%s: %v", id, err)
		}
		if n == 1 || strings.Contains(string(body), "never") {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer recv.Close()
	hook := &webhook.Hook{URL: recv.URL, Keys: [][]byte{key}, Client: recv.Client(), PublicURL: "https://ladder.example"}
	d := webhook.New(webhook.Options{Store: st, Poll: 20 * time.Millisecond, Endpoints: []webhook.Endpoint{
		{Name: "ws/hook", Workspace: "ws", Events: []string{ladder.EventLaneChanged}, MaxInFlight: 2, MaxAttempts: 3, Backoff: 10 * time.Millisecond, Timeout: time.Second, Sender: hook},
	}})
	var events []string
	for i := range 6 {
		step := "s"
		if i == 5 {
			step = "never"
		}
		e, _ := ladder.NewAuditEntry("ws", "system", ladder.AuditLaneChange, "lc", time.Now(), nil)
		e.Event = ladder.LaneChangedEvent(ladder.LaneChange{ID: "lc", Workspace: "ws", Queue: "q", Step: step, At: time.Now(), From: ladder.LaneShadow, To: ladder.LanePropose, Rule: "r"})
		events = append(events, e.Event.ID)
		if _, err := st.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// Another workspace's event and an unwanted type go nowhere.
	other, _ := ladder.NewAuditEntry("ws2", "system", ladder.AuditLaneChange, "lc", time.Now(), nil)
	other.Event = ladder.LaneChangedEvent(ladder.LaneChange{Workspace: "ws2", Step: "s", From: ladder.LaneShadow, To: ladder.LanePropose})
	if _, err := st.AppendAudit(ctx, other); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ds, err := st.ListDeliveries(ctx, ladder.DeliveryQuery{Workspace: "ws"})
		if err != nil {
			t.Fatal(err)
		}
		settled := 0
		for _, x := range ds {
			if x.Status != ladder.DeliveryPending {
				settled++
			}
		}
		if len(ds) == 6 && settled == 6 {
			for _, x := range ds {
				want, attempts := ladder.DeliveryDelivered, 2
				if x.EventID == events[5] {
					want, attempts = ladder.DeliveryDead, 3
				}
				if x.Status != want || x.Attempts != attempts {
					t.Errorf("delivery of %s: %s after %d tries, want %s after %d", x.EventID, x.Status, x.Attempts, want, attempts)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries not settled in 20s: %+v", ds)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if maxFlight > 2 {
		t.Errorf("%d tries at once, want at most max_in_flight 2", maxFlight)
	}
	if len(tries) != 6 {
		t.Errorf("%d events tried, want 6 (ws2's event goes nowhere)", len(tries))
	}
}

// sendFunc is a Sender that answers with a function.
type sendFunc func(ladder.Event) error

func (f sendFunc) Send(_ context.Context, ev ladder.Event) (int, error) {
	if err := f(ev); err != nil {
		return 503, err
	}
	return 200, nil
}

// TestDispatcherRetiresAndPrunes: a dispatcher started without an
// endpoint that still has pending deliveries makes them dead, with the
// reason, visible and counted; delivered deliveries older than the
// retention are deleted; a dead letter stays.
func TestDispatcherRetiresAndPrunes(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "l.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for range 3 {
		e, _ := ladder.NewAuditEntry("ws", "system", ladder.AuditLaneChange, "lc", time.Now(), nil)
		e.Event = ladder.LaneChangedEvent(ladder.LaneChange{ID: "lc", Workspace: "ws", Queue: "q", Step: "s", At: time.Now(), From: ladder.LaneShadow, To: ladder.LanePropose, Rule: "r"})
		if _, err := st.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	ok := webhook.Endpoint{Name: "ws/ok", Workspace: "ws", Sender: sendFunc(func(ladder.Event) error { return nil })}
	down := webhook.Endpoint{Name: "ws/down", Workspace: "ws", MaxAttempts: 10, Backoff: time.Hour, Sender: sendFunc(func(ladder.Event) error { return io.ErrUnexpectedEOF })}
	count := func(q ladder.DeliveryQuery) map[string]int {
		t.Helper()
		q.Workspace = "ws"
		ds, err := st.ListDeliveries(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, x := range ds {
			out[x.Endpoint+" "+string(x.Status)+" "+x.LastError]++
		}
		return out
	}
	run := func(o webhook.Options, until func() bool) {
		t.Helper()
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { webhook.New(o).Run(rctx); close(done) }()
		defer func() { cancel(); <-done }()
		for deadline := time.Now().Add(20 * time.Second); !until(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not done in 20s: %v", count(ladder.DeliveryQuery{}))
			}
		}
	}
	run(webhook.Options{Store: st, Poll: 10 * time.Millisecond, Endpoints: []webhook.Endpoint{ok, down}}, func() bool {
		c := count(ladder.DeliveryQuery{})
		return c["ws/ok delivered "] == 3 && c["ws/down pending "+io.ErrUnexpectedEOF.Error()] == 3
	})

	// ws/down leaves the config; an hour later by the clock, with a
	// minute's retention, ws/ok's delivered rows are past it.
	var mu sync.Mutex
	observed := map[string]int{}
	run(webhook.Options{Store: st, Poll: 10 * time.Millisecond, Endpoints: []webhook.Endpoint{ok},
		Retention: time.Minute, Now: func() time.Time { return time.Now().Add(time.Hour) },
		Observe: func(ep, outcome string) { mu.Lock(); observed[ep+" "+outcome]++; mu.Unlock() }},
		func() bool { return len(count(ladder.DeliveryQuery{Endpoint: "ws/ok"})) == 0 })
	want := map[string]int{"ws/down dead " + ladder.EndpointRemoved: 3}
	if diff := cmp.Diff(want, count(ladder.DeliveryQuery{})); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(map[string]int{"ws/down retired": 3}, observed); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
	if stats, err := st.DeliveryStats(ctx); err != nil || stats.Dead != 3 || stats.Pending != 0 || stats.Delivered != 0 || stats.OldestPending != 0 {
		t.Errorf("stats %+v %v, want 3 dead and nothing waiting", stats, err)
	}
}

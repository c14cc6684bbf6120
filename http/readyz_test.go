package http_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ladderhq/ladder/internal/faultstore"
	"github.com/ladderhq/ladder/internal/testenv"
)

// readyzUntil polls /readyz until it answers want, failing the test after
// within; it returns the last response and how long it took.
func readyzUntil(t *testing.T, e *testenv.Env, want int, within time.Duration) (testenv.Response, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		r := e.Do("GET", "/readyz", "", nil)
		if r.Status == want {
			return r, time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("/readyz not %d within %s: %d %s", want, within, r.Status, r.Raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReadyzFollowsTheWritePath: /readyz reports whether durable writes
// work (DESIGN.md §8), not merely whether the store answers.
func TestReadyzFollowsTheWritePath(t *testing.T) {
	// With no traffic at all, the server's own probe write meets the
	// fault within a few seconds, and the next probe after the fault
	// clears makes it ready again; reads work throughout.
	t.Run("no traffic", func(t *testing.T) {
		e, fs := faultEnv(t)
		fs.FailWrites(faultstore.ErrDiskFull)
		r, took := readyzUntil(t, e, 503, 3*time.Second)
		t.Logf("not ready %s after writes started failing", took.Round(time.Millisecond))
		if reason, _ := r.Body["reason"].(string); !strings.Contains(reason, "Durable writes are failing: the disk is full") || !strings.Contains(reason, "AUDIT_UNAVAILABLE") {
			t.Errorf("reason: %s", r.Raw)
		}
		if r := e.Do("GET", "/v1/steps", e.Keys["acme/agent"], nil); r.Status != 200 {
			t.Errorf("read while writes fail: %d %s", r.Status, r.Raw)
		}
		if r := e.Do("GET", "/healthz", "", nil); r.Status != 200 {
			t.Errorf("healthz while writes fail: %d", r.Status)
		}
		fs.FailWrites(nil)
		_, took = readyzUntil(t, e, 200, 3*time.Second)
		t.Logf("ready %s after writes recovered", took.Round(time.Millisecond))
	})

	// A fault the probe cannot see (a one-row probe fits where a route does
	// not): the callers' refused writes make the server not ready at once
	// and keep it so without probing, and the first write that succeeds
	// makes it ready again.
	t.Run("only callers' writes fail", func(t *testing.T) {
		e, fs := faultEnv(t)
		agent := e.Keys["acme/agent"]
		fs.FailWritesButPing(faultstore.ErrDiskFull)
		if r := e.Do("POST", "/v1/route", agent, map[string]any{"step": "auto_step", "item": "during"}); r.Status != 503 || r.ErrorCode() != "AUDIT_UNAVAILABLE" {
			t.Fatalf("route during the fault: %d %s", r.Status, r.Raw)
		}
		pings := fs.Pings()
		r := e.Do("GET", "/readyz", "", nil)
		if reason, _ := r.Body["reason"].(string); r.Status != 503 || !strings.Contains(reason, "the disk is full") {
			t.Fatalf("readyz after a refused write: %d %s", r.Status, r.Raw)
		}
		if r := e.Do("GET", "/v1/steps", agent, nil); r.Status != 200 {
			t.Errorf("read while writes fail: %d %s", r.Status, r.Raw)
		}
		time.Sleep(time.Second)
		if r := e.Do("GET", "/readyz", "", nil); r.Status != 503 {
			t.Errorf("readyz a second after a refused write: %d %s", r.Status, r.Raw)
		}
		if n := fs.Pings() - pings; n != 0 {
			t.Errorf("%d probes while a refused write answered for the store", n)
		}
		fs.FailWritesButPing(nil)
		if r := e.Do("POST", "/v1/route", agent, map[string]any{"step": "auto_step", "item": "after"}); r.Status != 200 {
			t.Fatalf("route after the fault: %d %s", r.Status, r.Raw)
		}
		if r := e.Do("GET", "/readyz", "", nil); r.Status != 200 {
			t.Errorf("readyz after a write succeeded: %d %s", r.Status, r.Raw)
		}
	})

	// /readyz is public: however often it is polled, and by how many at
	// once, the server makes about one probe write a second.
	t.Run("probes are rate-limited", func(t *testing.T) {
		e, fs := faultEnv(t)
		pings := fs.Pings()
		start := time.Now()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for time.Since(start) < 2*time.Second {
					resp, err := http.Get(e.Server.URL + "/readyz")
					if err != nil {
						t.Error(err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != 200 {
						t.Errorf("readyz: %d", resp.StatusCode)
					}
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		n, took := fs.Pings()-pings, time.Since(start).Round(time.Millisecond)
		if n > 4 {
			t.Errorf("%d probes in %s of /readyz polled by 4 clients every 20 ms; want about one a second", n, took)
		}
		t.Logf("%d probes in %s of /readyz polled by 4 clients every 20 ms", n, took)
	})
}

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ladderhq/ladder"
)

// TestCrash drives 64 concurrent route and capability calls at the real
// binary, kills it with SIGKILL at random moments, restarts it on the same
// database, and then checks that every call that got a success answer is
// in the store exactly once (the same route or call comes back, and its
// audit record exists once) and that `ladder audit verify` passes.
//
// LADDER_CRASH_KILLS sets the number of kills (default 5; CI runs 20, and
// BENCHMARKS.md records a longer local run). The PostgreSQL variant runs
// when LADDER_TEST_POSTGRES is set, in a fresh schema.
func TestCrash(t *testing.T) {
	kills := 5
	if v := os.Getenv("LADDER_CRASH_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LADDER_CRASH_KILLS=%q: want a positive number", v)
		}
		kills = n
	}
	t.Run("sqlite", func(t *testing.T) {
		runCrash(t, filepath.Join(t.TempDir(), "ladder.db"), nil, kills)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := os.Getenv("LADDER_TEST_POSTGRES")
		if dsn == "" {
			t.Skip("LADDER_TEST_POSTGRES is unset; the PostgreSQL crash test runs in CI")
		}
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		schema := "ladder_crash_" + hex.EncodeToString(b)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if conn, err := pgx.Connect(ctx, dsn); err == nil {
				_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
				conn.Close(ctx)
			}
		})
		runCrash(t, dsn, []string{"LADDER_PG_SCHEMA=" + schema}, kills)
	})
}

// crashServer is the `ladder serve` process the test kills and restarts.
type crashServer struct {
	t      *testing.T
	bin    string
	args   []string
	env    []string
	url    string
	log    *os.File
	cmd    *exec.Cmd
	starts int
}

func (s *crashServer) start() {
	s.t.Helper()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env = s.env
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd = cmd
	s.starts++
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("ladder serve (start %d) not ready within 30s; log: %s", s.starts, s.log.Name())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *crashServer) kill() {
	_ = s.cmd.Process.Kill() // SIGKILL: no shutdown, no flush
	_ = s.cmd.Wait()
}

func (s *crashServer) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.kill()
	}
}

// acked is what the server acknowledged: a route's id by item, a call's
// call or approval id by idempotency key.
type acked struct {
	mu     sync.Mutex
	routes map[string]string
	calls  map[string]ackedCall
}

type ackedCall struct {
	status string // executed or approval_requested
	id     string // call_id or approval_id
	route  string // the route of its bill
}

func post(client *http.Client, url, key string, body any) (int, map[string]any, error) {
	data, _ := json.Marshal(body)
	req, err := http.NewRequest("POST", url, bytes.NewReader(data))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err // cut off mid-answer: not an acknowledgement
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, m, nil
}

func runCrash(t *testing.T, db string, extraEnv []string, kills int) {
	bin := ladderBinary(t)
	dir := t.TempDir()
	out, err := exec.Command(bin, "demo", "--print-config").Output()
	if err != nil {
		t.Fatalf("demo --print-config: %v", err)
	}
	// One agent key sends 64 calls at once: lift its rate limit (and, below,
	// its cap on requests in progress).
	cfgText := strings.Replace(string(out), "per_second: 20000\n    burst: 40000", "per_second: 100000\n    burst: 100000", 1)
	if cfgText == string(out) {
		t.Fatal("the demo config's rate_limit block moved; update the crash test")
	}
	cfgPath := filepath.Join(dir, "ladder.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	_, admin, _ := ladder.NewKeyToken()
	logFile, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	addr := freeAddr(t)
	env := append(os.Environ(), "LADDER_ADMIN_KEY="+admin, "LADDER_AUDIT_SECRET=crash-test")
	env = append(env, extraEnv...)
	srv := &crashServer{t: t, bin: bin, args: []string{"serve", "--unsigned-audit", "--config", cfgPath, "--db", db, "--addr", addr, "--max-inflight-per-key", "256"}, env: env, url: "http://" + addr, log: logFile}
	srv.start()
	defer func() {
		if srv.cmd.ProcessState == nil {
			srv.kill()
		}
	}()

	client := &http.Client{Timeout: 15 * time.Second}
	st, kb, err := post(client, srv.url+"/v1/keys", admin, map[string]any{"workspace": "vantrow-bills", "kind": "agent", "name": "crash-test"})
	if err != nil || st != 201 {
		t.Fatalf("create agent key: %d %v %v", st, kb, err)
	}
	agent := kb["token"].(string)

	a := &acked{routes: map[string]string{}, calls: map[string]ackedCall{}}
	var seq, failures atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				n := seq.Add(1)
				if (n+int64(w))%2 == 0 {
					item := fmt.Sprintf("R-%d", n)
					st, m, err := post(client, srv.url+"/v1/route", agent, map[string]any{"step": "post_tms", "item": item})
					if err == nil && st == 200 {
						if id, _ := m["route_id"].(string); id != "" {
							a.mu.Lock()
							a.routes[item] = id
							a.mu.Unlock()
							continue
						}
					}
				} else {
					key := fmt.Sprintf("C-%d", n)
					st, m, err := post(client, srv.url+"/v1/capabilities/tms:postBill/call", agent,
						map[string]any{"payload": map[string]any{"bill_id": key, "amount_usd": 100 + n%900}, "idempotency_key": key})
					if err == nil && (st == 200 || st == 202) {
						status, _ := m["status"].(string)
						id, _ := m["call_id"].(string)
						if status == "approval_requested" {
							id, _ = m["approval_id"].(string)
						}
						route, _ := m["route_id"].(string)
						if id != "" && route != "" {
							a.mu.Lock()
							a.calls[key] = ackedCall{status: status, id: id, route: route}
							a.mu.Unlock()
							continue
						}
					}
				}
				failures.Add(1)
				time.Sleep(5 * time.Millisecond) // the server is down, or refused: back off a little
			}
		}()
	}

	start := time.Now()
	for i := range kills {
		time.Sleep(time.Duration(20+mrand.IntN(230)) * time.Millisecond)
		srv.kill()
		srv.start()
		if i%50 == 49 {
			t.Logf("%d kills, %s", i+1, time.Since(start).Round(time.Second))
		}
	}
	time.Sleep(200 * time.Millisecond)
	cancel()
	wg.Wait()
	t.Logf("%d kills in %s; %d routes and %d calls acknowledged, %d attempts failed or cut off", kills, time.Since(start).Round(time.Millisecond), len(a.routes), len(a.calls), failures.Load())
	if len(a.routes) == 0 || len(a.calls) == 0 {
		t.Fatal("nothing was acknowledged; the load did not reach the server")
	}

	// Every acknowledged route and call comes back as it was answered.
	type check struct{ kind, key string }
	jobs := make(chan check)
	var bad atomic.Int64
	var vwg sync.WaitGroup
	for range 32 {
		vwg.Add(1)
		go func() {
			defer vwg.Done()
			for c := range jobs {
				switch c.kind {
				case "route":
					want := a.routes[c.key]
					st, m, err := post(client, srv.url+"/v1/route", agent, map[string]any{"step": "post_tms", "item": c.key})
					if err != nil || st != 200 || m["route_id"] != want {
						bad.Add(1)
						t.Errorf("acknowledged route %s (%s) came back as %d %v %v", c.key, want, st, m["route_id"], err)
					}
				case "call":
					want := a.calls[c.key]
					// The same payload as the acknowledged call: a key
					// repeated with another payload is refused.
					var n int
					fmt.Sscanf(c.key, "C-%d", &n)
					st, m, err := post(client, srv.url+"/v1/capabilities/tms:postBill/call", agent,
						map[string]any{"payload": map[string]any{"bill_id": c.key, "amount_usd": 100 + n%900}, "idempotency_key": c.key})
					got, _ := m["call_id"].(string)
					if want.status == "approval_requested" {
						got, _ = m["approval_id"].(string)
					}
					if err != nil || got != want.id || (want.status == "executed" && m["replayed"] != true) {
						bad.Add(1)
						t.Errorf("acknowledged call %s (%s %s) came back as %d %v %v", c.key, want.status, want.id, st, m, err)
					}
					// The call was routed for its bill (the payload's item),
					// so routing the bill returns the call's route.
					st, m, err = post(client, srv.url+"/v1/route", agent, map[string]any{"step": "post_tms", "item": c.key})
					if err != nil || st != 200 || m["route_id"] != want.route {
						bad.Add(1)
						t.Errorf("the bill of acknowledged call %s routes as %d %v %v, want the call's route %s", c.key, st, m["route_id"], err, want.route)
					}
				}
				if bad.Load() > 20 {
					for range jobs { // enough reported; let the sender finish
					}
					return
				}
			}
		}()
	}
	for item := range a.routes {
		jobs <- check{"route", item}
	}
	for key := range a.calls {
		jobs <- check{"call", key}
	}
	close(jobs)
	vwg.Wait()
	srv.stop()

	// Exactly once in the audit log, and the chain is intact.
	getenv := func(k string) string {
		for _, kv := range extraEnv {
			if name, v, ok := strings.Cut(kv, "="); ok && name == k {
				return v
			}
		}
		return os.Getenv(k)
	}
	store, err := openStore(context.Background(), db, getenv, newLogger(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	routeItem := map[string]string{}
	err = store.WalkAudit(context.Background(), 0, func(r ladder.AuditRecord) error {
		switch {
		case r.Kind == ladder.AuditRoute:
			count[r.Subject]++
			var d struct {
				Item string `json:"item"`
			}
			if err := json.Unmarshal(r.Data, &d); err != nil {
				return err
			}
			routeItem[r.Subject] = d.Item
		case r.Kind == ladder.AuditCall:
			count[r.Subject]++
		case r.Kind == ladder.AuditApproval && bytes.Contains(r.Data, []byte(`"event":"requested"`)):
			count[r.Subject]++
		}
		return nil
	})
	store.Close()
	if err != nil {
		t.Fatal(err)
	}
	for item, id := range a.routes {
		if count[id] != 1 {
			t.Errorf("route %s (%s) has %d audit records, want 1", item, id, count[id])
		}
	}
	for key, c := range a.calls {
		if count[c.id] != 1 {
			t.Errorf("call %s (%s) has %d audit records, want 1", key, c.id, count[c.id])
		}
		if count[c.route] != 1 || routeItem[c.route] != key {
			t.Errorf("call %s: its route %s has %d audit records for item %q, want 1 for the bill", key, c.route, count[c.route], routeItem[c.route])
		}
	}
	verify := exec.Command(bin, "audit", "verify", "--db", db)
	verify.Env = env
	vout, err := verify.CombinedOutput()
	if err != nil {
		t.Fatalf("ladder audit verify: %v\n%s", err, vout)
	}
	t.Logf("%s", bytes.TrimSpace(vout))
}

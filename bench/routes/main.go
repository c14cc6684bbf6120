// Command routes measures durable routes/s through one `ladder serve` on
// loopback, on SQLite and on PostgreSQL, in one run: N concurrent clients
// post POST /v1/route with distinct items over keep-alive connections for a
// fixed time, and it prints routes/s with p50 and p99 latency per backend
// as a Markdown table (BENCHMARKS.md, "Durable routes through one
// replica").
//
//	go run ./bench/routes -pg postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//
// Every route answered 200 is durable: the server answers after the group
// commit that holds the route and its audit record. The PostgreSQL run
// uses a fresh schema (LADDER_PG_SCHEMA) that it drops at the end; the
// SQLite run a fresh file in a temporary folder.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ladderhq/ladder/bench/internal/loadkit"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/config"
)

type options struct {
	bin      string
	pg       string
	clients  int
	duration time.Duration
	warmup   time.Duration
	step     string
	backends string
	addr     string
}

func main() {
	var o options
	flag.StringVar(&o.bin, "ladder", "", "ladder binary (default: go build ./cmd/ladder into a temporary folder)")
	flag.StringVar(&o.pg, "pg", os.Getenv("LADDER_TEST_POSTGRES"), "PostgreSQL DSN (default $LADDER_TEST_POSTGRES); empty skips PostgreSQL")
	flag.IntVar(&o.clients, "clients", 64, "concurrent clients, each with its own keep-alive connection")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per backend")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load before the measured time")
	flag.StringVar(&o.step, "step", "post_tms", "step of the demo config's bills queue to route")
	flag.StringVar(&o.backends, "backends", "sqlite,postgres", "backends to measure, in order")
	flag.StringVar(&o.addr, "addr", "127.0.0.1:0", "address ladder serve listens on (port 0: any free one)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "routes:", err)
		os.Exit(1)
	}
}

type result struct {
	backend  string
	ok       int
	failed   int
	elapsed  time.Duration
	p50, p99 time.Duration
	firstErr string
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "ladder-routes-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if o.bin == "" {
		o.bin = filepath.Join(dir, "ladder")
		if out, err := exec.Command("go", "build", "-o", o.bin, "./cmd/ladder").CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/ladder (run from the repository root): %v\n%s", err, out)
		}
	}
	cfg := filepath.Join(dir, "ladder.yaml")
	if err := os.WriteFile(cfg, config.Demo(), 0o600); err != nil {
		return err
	}
	var results []result
	for _, b := range strings.Split(o.backends, ",") {
		var r result
		switch b {
		case "sqlite":
			r, err = measure(o, cfg, "SQLite (WAL, synchronous=FULL)", filepath.Join(dir, "ladder.db"), nil)
		case "postgres":
			if o.pg == "" {
				fmt.Fprintln(os.Stderr, "routes: no -pg DSN and LADDER_TEST_POSTGRES unset; skipping PostgreSQL")
				continue
			}
			schema := "ladder_routes_" + loadkit.RandHex(6)
			r, err = measure(o, cfg, "PostgreSQL (synchronous_commit=on)", o.pg, []string{"LADDER_PG_SCHEMA=" + schema})
			if derr := loadkit.DropSchema(o.pg, schema); derr != nil {
				fmt.Fprintln(os.Stderr, "routes: drop schema:", derr)
			}
		default:
			return fmt.Errorf("unknown backend %q; use sqlite, postgres", b)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", b, err)
		}
		results = append(results, r)
	}
	fmt.Printf("\n%d clients, %s measured after %s warm-up, POST /v1/route (bills/%s, distinct items), %d CPUs, %s\n\n",
		o.clients, o.duration, o.warmup, o.step, runtime.NumCPU(), runtime.Version())
	fmt.Println("| backend | durable routes/s | p50 | p99 | routes | failed |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	for _, r := range results {
		fmt.Printf("| %s | %.0f | %s | %s | %d | %d |\n", r.backend, float64(r.ok)/r.elapsed.Seconds(), loadkit.Ms(r.p50), loadkit.Ms(r.p99), r.ok, r.failed)
		if r.firstErr != "" {
			fmt.Printf("\n%s: first failure: %s\n", r.backend, r.firstErr)
		}
	}
	return nil
}

// measure starts `ladder serve` on db, creates an agent key, loads it and
// stops it.
func measure(o options, cfg, name, db string, env []string) (result, error) {
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return result{}, err
	}
	addr := ln.Addr().String()
	ln.Close()
	_, admin, _ := ladder.NewKeyToken()
	// One agent key drives every client: lift the per-key cap on requests
	// in progress (32 by default), which would answer 429 past it.
	cmd := exec.Command(o.bin, "serve", "--unsigned-audit", "--config", cfg, "--db", db, "--addr", addr, "--max-inflight-per-key", "-1")
	cmd.Env = append(append(os.Environ(), "LADDER_ADMIN_KEY="+admin, "LADDER_AUDIT_SECRET=route-bench"), env...)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}()
	base := "http://" + addr
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: o.clients, MaxConnsPerHost: o.clients, IdleConnTimeout: time.Minute,
	}}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if st, _, err := loadkit.Post(client, "GET", base+"/readyz", "", nil); err == nil && st == 200 {
			break
		}
		select {
		case <-exited:
			return result{}, fmt.Errorf("ladder serve exited: %s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			return result{}, errors.New("ladder serve not ready within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	st, body, err := loadkit.Post(client, "POST", base+"/v1/keys", admin, map[string]string{"workspace": "vantrow-bills", "kind": "agent", "name": "route bench"})
	if err != nil || st != http.StatusCreated {
		return result{}, fmt.Errorf("create agent key: %d %s %v", st, body, err)
	}
	var key struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(body, &key); err != nil {
		return result{}, err
	}

	run := loadkit.RandHex(4)
	var (
		measuring atomic.Bool
		stop      atomic.Bool
		failed    atomic.Int64
		firstErr  atomic.Value
		mu        sync.Mutex
		lat       []time.Duration
		wg        sync.WaitGroup
	)
	for c := range o.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for n := 0; !stop.Load(); n++ {
				req := map[string]string{"queue": "bills", "step": o.step, "item": fmt.Sprintf("%s-%d-%d", run, c, n)}
				t0 := time.Now()
				st, body, err := loadkit.Post(client, "POST", base+"/v1/route", key.Token, req)
				d := time.Since(t0)
				if !measuring.Load() {
					continue
				}
				if err != nil || st != http.StatusOK {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%d %s %v", st, bytes.TrimSpace(body), err))
					continue
				}
				mine = append(mine, d)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	time.Sleep(o.warmup)
	measuring.Store(true)
	start := time.Now()
	time.Sleep(o.duration)
	measuring.Store(false)
	elapsed := time.Since(start)
	stop.Store(true)
	wg.Wait()
	// Calls that finished after the window closed are not counted; calls
	// in flight when it opened are (a wash at this duration).
	r := result{backend: name, ok: len(lat), failed: int(failed.Load()), elapsed: elapsed}
	if e, ok := firstErr.Load().(string); ok {
		r.firstErr = e
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.p50 = lat[len(lat)*50/100]
		r.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	fmt.Fprintf(os.Stderr, "%s: %d routes in %s (%.0f/s), p50 %s, p99 %s, %d failed\n", name, r.ok, elapsed.Round(time.Millisecond), float64(r.ok)/elapsed.Seconds(), loadkit.Ms(r.p50), loadkit.Ms(r.p99), r.failed)
	return r, nil
}

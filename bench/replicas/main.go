// Command replicas measures durable routes/s on PostgreSQL with one and
// with two `ladder serve` replicas on one schema, 64 clients writing two
// workspaces at once (half route bills/post_tms in vantrow-bills, half
// check_calls/capture_eta in checkcall-loads; client c talks to replica
// c mod N), for one or more ladder binaries in one run, and prints a
// Markdown table (BENCHMARKS.md, issue 21). Giving it a binary built before
// per-workspace chains and one after compares the single audit head row
// with a head per workspace:
//
//	go run ./bench/replicas -pg postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//		-ladder before=/tmp/ladder-before,after=/tmp/ladder-after -port 23100
//
// Each measurement uses a fresh schema that it drops at the end. Every
// route answered 200 is durable (the group commit that holds it and its
// audit record committed).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
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
	bins     string
	pg       string
	clients  int
	duration time.Duration
	warmup   time.Duration
	port     int
	replicas string
}

// target is one workspace's route the clients send.
type target struct{ workspace, queue, step string }

var targets = []target{{"vantrow-bills", "bills", "post_tms"}, {"checkcall-loads", "check_calls", "capture_eta"}}

func main() {
	var o options
	flag.StringVar(&o.bins, "ladder", "", "label=binary,… of the ladder binaries to measure, in order (required)")
	flag.StringVar(&o.pg, "pg", os.Getenv("LADDER_TEST_POSTGRES"), "PostgreSQL DSN (default $LADDER_TEST_POSTGRES)")
	flag.IntVar(&o.clients, "clients", 64, "concurrent clients, each with its own keep-alive connection")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per measurement")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load before the measured time")
	flag.IntVar(&o.port, "port", 23100, "first loopback port of the replicas (one per replica)")
	flag.StringVar(&o.replicas, "replicas", "1,2", "replica counts to measure")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "replicas:", err)
		os.Exit(1)
	}
}

type result struct {
	label    string
	replicas int
	ok       [2]int
	failed   int
	elapsed  time.Duration
	p50, p99 time.Duration
	firstErr string
}

func run(o options) error {
	if o.bins == "" || o.pg == "" {
		return errors.New("-ladder and -pg are required")
	}
	dir, err := os.MkdirTemp("", "ladder-replicas-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "ladder.yaml")
	if err := os.WriteFile(cfg, config.Demo(), 0o600); err != nil {
		return err
	}
	var results []result
	for _, lb := range strings.Split(o.bins, ",") {
		label, bin, ok := strings.Cut(lb, "=")
		if !ok {
			return fmt.Errorf("-ladder %q: want label=binary", lb)
		}
		for _, rs := range strings.Split(o.replicas, ",") {
			var n int
			if _, err := fmt.Sscan(rs, &n); err != nil || n < 1 {
				return fmt.Errorf("-replicas %q", rs)
			}
			schema := "ladder_replicas_" + loadkit.RandHex(6)
			r, err := measure(o, bin, cfg, schema, n)
			if derr := loadkit.DropSchema(o.pg, schema); derr != nil {
				fmt.Fprintln(os.Stderr, "replicas: drop schema:", derr)
			}
			if err != nil {
				return fmt.Errorf("%s, %d replicas: %w", label, n, err)
			}
			r.label = label
			results = append(results, r)
		}
	}
	fmt.Printf("\n%d clients over two workspaces, %s measured after %s warm-up, POST /v1/route (distinct items), PostgreSQL synchronous_commit=on, %d CPUs, %s\n\n",
		o.clients, o.duration, o.warmup, runtime.NumCPU(), runtime.Version())
	fmt.Println("| ladder | replicas | durable routes/s | vantrow-bills | checkcall-loads | p50 | p99 | failed |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		s := r.elapsed.Seconds()
		fmt.Printf("| %s | %d | %.0f | %.0f | %.0f | %s | %s | %d |\n", r.label, r.replicas, float64(r.ok[0]+r.ok[1])/s, float64(r.ok[0])/s, float64(r.ok[1])/s, loadkit.Ms(r.p50), loadkit.Ms(r.p99), r.failed)
		if r.firstErr != "" {
			fmt.Printf("\n%s with %d replicas: first failure: %s\n", r.label, r.replicas, r.firstErr)
		}
	}
	return nil
}

// serve starts one replica and waits until it is ready; stop stops it.
func serve(bin, cfg, dsn, schema, admin string, port int, client *http.Client) (base string, stop func(), err error) {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, "serve", "--unsigned-audit", "--config", cfg, "--db", dsn, "--addr", addr)
	cmd.Env = append(os.Environ(), "LADDER_ADMIN_KEY="+admin, "LADDER_AUDIT_SECRET=replica-bench", "LADDER_PG_SCHEMA="+schema)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop = func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	base = "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); ; {
		if st, _, err := loadkit.Post(client, "GET", base+"/readyz", "", nil); err == nil && st == 200 {
			return base, stop, nil
		}
		select {
		case <-exited:
			return "", nil, fmt.Errorf("ladder serve exited: %s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, errors.New("ladder serve not ready within 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// measure starts n replicas on one fresh schema (the first alone, so it
// migrates), creates an agent key per workspace, loads them and stops them.
func measure(o options, bin, cfg, schema string, n int) (result, error) {
	_, admin, _ := ladder.NewKeyToken()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: o.clients, MaxConnsPerHost: o.clients, IdleConnTimeout: time.Minute,
	}}
	var bases []string
	for i := range n {
		base, stop, err := serve(bin, cfg, o.pg, schema, admin, o.port+i, client)
		if err != nil {
			return result{}, err
		}
		defer stop()
		bases = append(bases, base)
	}
	tokens := make([]string, len(targets))
	for i, tg := range targets {
		st, body, err := loadkit.Post(client, "POST", bases[0]+"/v1/keys", admin, map[string]string{"workspace": tg.workspace, "kind": "agent", "name": "replica bench"})
		if err != nil || st != http.StatusCreated {
			return result{}, fmt.Errorf("create agent key: %d %s %v", st, body, err)
		}
		var key struct {
			Token string `json:"token"`
		}
		if err := json.Unmarshal(body, &key); err != nil {
			return result{}, err
		}
		tokens[i] = key.Token
	}

	run := loadkit.RandHex(4)
	var (
		measuring, stop atomic.Bool
		failed          atomic.Int64
		okBy            [2]atomic.Int64
		firstErr        atomic.Value
		mu              sync.Mutex
		lat             []time.Duration
		wg              sync.WaitGroup
	)
	for c := range o.clients {
		wg.Go(func() {
			w := c % len(targets)
			tg, base := targets[w], bases[(c/len(targets))%len(bases)]
			var mine []time.Duration
			for i := 0; !stop.Load(); i++ {
				req := map[string]string{"queue": tg.queue, "step": tg.step, "item": fmt.Sprintf("%s-%d-%d", run, c, i)}
				t0 := time.Now()
				st, body, err := loadkit.Post(client, "POST", base+"/v1/route", tokens[w], req)
				d := time.Since(t0)
				if !measuring.Load() {
					continue
				}
				if err != nil || st != http.StatusOK {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%d %s %v", st, bytes.TrimSpace(body), err))
					continue
				}
				okBy[w].Add(1)
				mine = append(mine, d)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	time.Sleep(o.warmup)
	measuring.Store(true)
	start := time.Now()
	time.Sleep(o.duration)
	measuring.Store(false)
	elapsed := time.Since(start)
	stop.Store(true)
	wg.Wait()
	r := result{replicas: n, ok: [2]int{int(okBy[0].Load()), int(okBy[1].Load())}, failed: int(failed.Load()), elapsed: elapsed}
	if e, ok := firstErr.Load().(string); ok {
		r.firstErr = e
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.p50 = lat[len(lat)*50/100]
		r.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	fmt.Fprintf(os.Stderr, "%s, %d replicas: %d routes in %s (%.0f/s), p50 %s, p99 %s, %d failed\n", bin, n, len(lat), elapsed.Round(time.Millisecond), float64(len(lat))/elapsed.Seconds(), loadkit.Ms(r.p50), loadkit.Ms(r.p99), r.failed)
	return r, nil
}

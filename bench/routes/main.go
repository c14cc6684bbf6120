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
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"time"

	"github.com/ladderhq/ladder/bench/internal/loadkit"

	"github.com/ladderhq/ladder"
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
	surface  string
	keys     int
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
	flag.StringVar(&o.surface, "surface", "rest", "rest (POST /v1/route) or mcp (the route_item tool on /mcp)")
	flag.IntVar(&o.keys, "keys", 1, "agent keys the clients share out, client c using key c mod keys (as many agents as keys)")
	flag.Parse()
	if o.surface != "rest" && o.surface != "mcp" {
		fmt.Fprintf(os.Stderr, "routes: -surface is %q; use rest or mcp\n", o.surface)
		os.Exit(2)
	}
	if o.keys < 1 || o.keys > o.clients {
		fmt.Fprintf(os.Stderr, "routes: -keys is %d; use 1 to -clients (%d)\n", o.keys, o.clients)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "routes:", err)
		os.Exit(1)
	}
}

type result struct {
	backend string
	loadkit.Result
}

func run(o options) error {
	dir, cfg, cleanup, err := loadkit.Workdir("ladder-routes-", &o.bin)
	if err != nil {
		return err
	}
	defer cleanup()
	names := map[string]string{"sqlite": "SQLite (WAL, synchronous=FULL)", "postgres": "PostgreSQL (synchronous_commit=on)"}
	var results []result
	if err := loadkit.ForBackends("routes", o.backends, o.pg, func(b string) error {
		db, env, drop := loadkit.FreshDB("routes", b, dir, "ladder", o.pg)
		defer drop()
		r, err := measure(o, cfg, names[b], db, env)
		results = append(results, r)
		return err
	}); err != nil {
		return err
	}
	how := "POST /v1/route"
	if o.surface == "mcp" {
		how = "route_item on /mcp"
	}
	fmt.Printf("\n%d clients, %d agent keys, %s measured after %s warm-up, %s (bills/%s, distinct items), %d CPUs, %s\n\n",
		o.clients, o.keys, o.duration, o.warmup, how, o.step, runtime.NumCPU(), runtime.Version())
	fmt.Println("| backend | durable routes/s | p50 | p99 | routes | failed |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	for _, r := range results {
		fmt.Printf("| %s | %.0f | %s | %s | %d | %d |\n", r.backend, float64(r.Total())/r.Elapsed.Seconds(), loadkit.Ms(r.P50), loadkit.Ms(r.P99), r.Total(), r.Failed)
		if r.FirstErr != "" {
			fmt.Printf("\n%s: first failure: %s\n", r.backend, r.FirstErr)
		}
	}
	return nil
}

// measure starts `ladder serve` on db, creates the agent keys, loads it
// and stops it.
func measure(o options, cfg, name, db string, env []string) (result, error) {
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return result{}, err
	}
	addr := ln.Addr().String()
	ln.Close()
	_, admin, _ := ladder.NewKeyToken()
	client := loadkit.NewClient(o.clients)
	// One agent key may drive many clients: lift the per-key cap on
	// requests in progress (32 by default), which would answer 429 past it.
	base, stop, err := loadkit.Serve(o.bin, addr, []string{"--unsigned-audit", "--config", cfg, "--db", db, "--max-inflight-per-key", "-1"},
		append([]string{"LADDER_ADMIN_KEY=" + admin, "LADDER_AUDIT_SECRET=route-bench"}, env...), client, 30*time.Second)
	if err != nil {
		return result{}, err
	}
	defer stop()
	tokens := make([]string, o.keys)
	for i := range tokens {
		if tokens[i], err = loadkit.AgentKey(client, base, admin, "vantrow-bills", fmt.Sprintf("route bench %d", i)); err != nil {
			return result{}, err
		}
	}
	run := loadkit.RandHex(4)
	lr := loadkit.Load(o.clients, 1, o.warmup, o.duration, func(c, n int) (int, string) {
		item := fmt.Sprintf("%s-%d-%d", run, c, n)
		token := tokens[c%len(tokens)]
		if o.surface == "mcp" {
			return 0, loadkit.CallRouteItem(client, base, token, map[string]string{"step": o.step, "item": item})
		}
		return 0, loadkit.PostRoute(client, base, token, map[string]string{"queue": "bills", "step": o.step, "item": item})
	})
	r := result{backend: name, Result: lr}
	fmt.Fprintf(os.Stderr, "%s: %d routes in %s (%.0f/s), p50 %s, p99 %s, %d failed\n", name, lr.Total(), lr.Elapsed.Round(time.Millisecond), float64(lr.Total())/lr.Elapsed.Seconds(), loadkit.Ms(lr.P50), loadkit.Ms(lr.P99), lr.Failed)
	return r, nil
}

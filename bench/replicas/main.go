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
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/ladderhq/ladder/bench/internal/loadkit"

	"github.com/ladderhq/ladder"
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
	loadkit.Result
}

func run(o options) error {
	if o.bins == "" || o.pg == "" {
		return errors.New("-ladder and -pg are required")
	}
	_, cfg, cleanup, err := loadkit.Workdir("ladder-replicas-", nil)
	if err != nil {
		return err
	}
	defer cleanup()
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
		s := r.Elapsed.Seconds()
		fmt.Printf("| %s | %d | %.0f | %.0f | %.0f | %s | %s | %d |\n", r.label, r.replicas, float64(r.Total())/s, float64(r.OK[0])/s, float64(r.OK[1])/s, loadkit.Ms(r.P50), loadkit.Ms(r.P99), r.Failed)
		if r.FirstErr != "" {
			fmt.Printf("\n%s with %d replicas: first failure: %s\n", r.label, r.replicas, r.FirstErr)
		}
	}
	return nil
}

// measure starts n replicas on one fresh schema (the first alone, so it
// migrates), creates an agent key per workspace, loads them and stops them.
func measure(o options, bin, cfg, schema string, n int) (result, error) {
	_, admin, _ := ladder.NewKeyToken()
	client := loadkit.NewClient(o.clients)
	var bases []string
	for i := range n {
		base, stop, err := loadkit.Serve(bin, fmt.Sprintf("127.0.0.1:%d", o.port+i), []string{"--unsigned-audit", "--config", cfg, "--db", o.pg},
			[]string{"LADDER_ADMIN_KEY=" + admin, "LADDER_AUDIT_SECRET=replica-bench", "LADDER_PG_SCHEMA=" + schema}, client, 60*time.Second)
		if err != nil {
			return result{}, err
		}
		defer stop()
		bases = append(bases, base)
	}
	tokens := make([]string, len(targets))
	for i, tg := range targets {
		token, err := loadkit.AgentKey(client, bases[0], admin, tg.workspace, "replica bench")
		if err != nil {
			return result{}, err
		}
		tokens[i] = token
	}
	run := loadkit.RandHex(4)
	lr := loadkit.Load(o.clients, len(targets), o.warmup, o.duration, func(c, i int) (int, string) {
		w := c % len(targets)
		tg, base := targets[w], bases[(c/len(targets))%len(bases)]
		return w, loadkit.PostRoute(client, base, tokens[w], map[string]string{"queue": tg.queue, "step": tg.step, "item": fmt.Sprintf("%s-%d-%d", run, c, i)})
	})
	fmt.Fprintf(os.Stderr, "%s, %d replicas: %d routes in %s (%.0f/s), p50 %s, p99 %s, %d failed\n", bin, n, lr.Total(), lr.Elapsed.Round(time.Millisecond), float64(lr.Total())/lr.Elapsed.Seconds(), loadkit.Ms(lr.P50), loadkit.Ms(lr.P99), lr.Failed)
	return result{replicas: n, Result: lr}, nil
}

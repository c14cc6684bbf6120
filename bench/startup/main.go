// Command startup measures how long `ladder serve` takes from its start to
// answering (DESIGN §11: start-up ≤ 300 ms): each round starts the binary on
// a fresh database with the demo config (migrations applied, the config and
// its CEL gate cases compiled), polls /healthz every 5 ms until it answers
// 200, then /readyz, stops the server, and prints the times of every round
// with their median as a Markdown table.
//
//	go run ./bench/startup [-ladder BIN] [-rounds 7] [-pg DSN]
//
// The SQLite rounds each use a new file; with -pg (default
// $LADDER_TEST_POSTGRES) the PostgreSQL rounds each use a new schema that is
// dropped after the round. The binary is built once, before the first
// round, so no round pays for the build.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/bench/internal/loadkit"
)

// poll is how often a round asks whether the server answers; a round's
// time is late by at most this.
const poll = 5 * time.Millisecond

type options struct {
	bin      string
	pg       string
	rounds   int
	backends string
}

func main() {
	var o options
	flag.StringVar(&o.bin, "ladder", "", "ladder binary (default: go build ./cmd/ladder into a temporary folder)")
	flag.StringVar(&o.pg, "pg", os.Getenv("LADDER_TEST_POSTGRES"), "PostgreSQL DSN (default $LADDER_TEST_POSTGRES); empty skips PostgreSQL")
	flag.IntVar(&o.rounds, "rounds", 7, "starts per backend")
	flag.StringVar(&o.backends, "backends", "sqlite,postgres", "backends to measure, in order")
	flag.Parse()
	if o.rounds < 1 {
		fmt.Fprintf(os.Stderr, "startup: -rounds is %d; use 1 or more\n", o.rounds)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "startup:", err)
		os.Exit(1)
	}
}

// times is one backend's rounds: to /healthz 200 and to /readyz 200.
type times struct {
	backend         string
	healthz, readyz []time.Duration
}

func run(o options) error {
	dir, cfg, cleanup, err := loadkit.Workdir("ladder-startup-", &o.bin)
	if err != nil {
		return err
	}
	defer cleanup()
	names := map[string]string{"sqlite": "SQLite, a new file", "postgres": "PostgreSQL, a new schema"}
	var all []times
	if err := loadkit.ForBackends("startup", o.backends, o.pg, func(b string) error {
		t := times{backend: names[b]}
		for i := range o.rounds {
			db, env, drop := loadkit.FreshDB("startup", b, dir, fmt.Sprintf("round%d", i), o.pg)
			h, r, err := start(o.bin, cfg, db, env)
			drop()
			if err != nil {
				return fmt.Errorf("round %d: %w", i+1, err)
			}
			t.healthz, t.readyz = append(t.healthz, h), append(t.readyz, r)
		}
		all = append(all, t)
		return nil
	}); err != nil {
		return err
	}
	fmt.Printf("\n`ladder serve` with the demo config, %d rounds a backend, polled every %s, %d CPUs, %s\n\n", o.rounds, poll, runtime.NumCPU(), runtime.Version())
	fmt.Println("| backend | to /healthz 200, each round | median | to /readyz 200, median | slowest |")
	fmt.Println("|---|---|---:|---:|---:|")
	for _, t := range all {
		each := make([]string, len(t.healthz))
		for i, d := range t.healthz {
			each[i] = fmt.Sprint(d.Round(time.Millisecond).Milliseconds())
		}
		fmt.Printf("| %s | %s ms | %s | %s | %s |\n", t.backend, strings.Join(each, ", "),
			loadkit.Ms(median(t.healthz)), loadkit.Ms(median(t.readyz)), loadkit.Ms(slices.Max(t.readyz)))
	}
	return nil
}

// start runs one round: ladder serve on db, timed to /healthz and then
// /readyz answering 200, then stopped.
func start(bin, cfg, db string, env []string) (healthz, readyz time.Duration, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	addr := ln.Addr().String()
	ln.Close()
	_, admin, _ := ladder.NewKeyToken()
	p, err := loadkit.Start(bin, addr, []string{"--unsigned-audit", "--config", cfg, "--db", db},
		append([]string{"LADDER_ADMIN_KEY=" + admin, "LADDER_AUDIT_SECRET=startup-bench"}, env...))
	if err != nil {
		return 0, 0, err
	}
	defer p.Stop()
	client := loadkit.NewClient(1)
	if healthz, err = p.Await(client, "/healthz", poll, 30*time.Second); err != nil {
		return 0, 0, err
	}
	readyz, err = p.Await(client, "/readyz", poll, 30*time.Second)
	return healthz, readyz, err
}

// median is the middle of ds (the upper middle of an even count).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

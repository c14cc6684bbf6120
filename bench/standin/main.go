// Command standin serves the demo's stand-in systems (a TMS, a rates
// service and a payments service over HTTP, the partner ledger over MCP)
// on their own, in a process of their own, on a loopback address:
//
//	standin -addr 127.0.0.1:18954
//	ladder demo --upstream http://127.0.0.1:18954
//
// `ladder demo` serves them in its own process by default, where the
// stand-in ledger's garbage (go-sdk's) and goroutines share ladder's heap,
// collector and scheduler; a deployment's upstreams are other programs.
// bench/run.sh uses this with STANDIN_ADDR set, to measure the capability
// call as a deployment runs it. It prints its URL on stdout once it
// listens and stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ladderhq/ladder/bench/internal/baseline"
	"github.com/ladderhq/ladder/demo"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18954", "loopback address to listen on")
	flag.Parse()
	if err := run(*addr); err != nil {
		fmt.Fprintln(os.Stderr, "standin:", err)
		os.Exit(1)
	}
}

func run(addr string) error {
	// The stand-ins answer anyone without a key: they are test doubles,
	// so they stay on this machine, as every bench server does.
	if err := baseline.CheckLoopback(addr); err != nil {
		return fmt.Errorf("-addr: %w (the stand-ins answer without authentication, so they listen on loopback only: want host:port, such as 127.0.0.1:18954)", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	up, err := demo.ListenUpstream(addr)
	if err != nil {
		return err
	}
	fmt.Println(up.URL)
	<-ctx.Done()
	return up.Close()
}

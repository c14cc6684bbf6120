// Command plainserver is the floor of the MCP speed budget (DESIGN §11): a
// plain net/http handler that decodes the JSON-RPC tools/call request the
// load generator sends and answers a fixed result, as the no-op tool of
// bareserver would, on a loopback address.
//
//	plainserver -addr 127.0.0.1:18952 [-pprof 127.0.0.1:18962]
package main

import (
	"context"
	"flag"
	"fmt"
	_ "net/http/pprof" // served only with -pprof, on its own listener
	"os"
	"os/signal"
	"syscall"

	"github.com/ladderhq/ladder/bench/internal/baseline"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18952", "loopback address to listen on")
	pprofAddr := flag.String("pprof", "", "if set, serve net/http/pprof on this loopback address")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := baseline.Serve(ctx, "plainserver", *addr, *pprofAddr, baseline.NewPlainHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "plainserver:", err)
		os.Exit(1)
	}
}

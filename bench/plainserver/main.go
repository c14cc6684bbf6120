// Command plainserver is the floor of the MCP speed budget (DESIGN §11): a
// plain net/http handler that decodes the JSON-RPC tools/call request the
// load generator sends and answers a fixed result, as the no-op tool of
// bareserver would, on a loopback address.
//
//	plainserver -addr 127.0.0.1:18952 [-pprof 127.0.0.1:18962]
package main

import (
	_ "net/http/pprof" // served only with -pprof, on its own listener

	"github.com/ladderhq/ladder/bench/internal/baseline"
)

func main() {
	baseline.Main("plainserver", "127.0.0.1:18952", baseline.NewPlainHandler())
}

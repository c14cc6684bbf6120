// Command bareserver is the baseline of the MCP speed budget (DESIGN §11): a
// bare github.com/modelcontextprotocol/go-sdk server with the options ladder
// uses for POST /mcp (stateless, JSON responses, 1 MiB body cap) and one
// no-op tool named "noop", on a loopback address.
//
// It does no authentication, no strict JSON check and no storage: what it
// costs per call is what the SDK itself costs.
//
//	bareserver -addr 127.0.0.1:18951 [-pprof 127.0.0.1:18961]
package main

import (
	_ "net/http/pprof" // served only with -pprof, on its own listener

	"github.com/ladderhq/ladder/bench/internal/baseline"
)

func main() {
	baseline.Main("bareserver", "127.0.0.1:18951", baseline.NewSDKHandler())
}

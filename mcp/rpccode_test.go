package mcp

import (
	"testing"

	"github.com/ladderhq/ladder"
)

// Every refusal name has a JSON-RPC code, and the table names no refusal
// the root package does not: a new code cannot ship answered as INTERNAL.
func TestEveryCodeHasAnRPCCode(t *testing.T) {
	names := map[ladder.Code]bool{}
	for _, c := range ladder.Codes() {
		names[c.Code] = true
		n, ok := rpcCodeOf[c.Code]
		if !ok {
			t.Errorf("%s has no JSON-RPC code in rpcCodeOf", c.Code)
			continue
		}
		if n > -32000 || n < -32768 {
			t.Errorf("%s answers %d, outside the JSON-RPC error range", c.Code, n)
		}
	}
	for c := range rpcCodeOf {
		if !names[c] {
			t.Errorf("rpcCodeOf has a row for %s, which ladder.Codes does not list", c)
		}
	}
	if got := RPCCode("NO_SUCH_CODE"); got != ladder.RPCInternal {
		t.Errorf("an unknown code answers %d, want %d", got, ladder.RPCInternal)
	}
	// An error that carries its own code keeps it.
	if got := rpcCode(&ladder.Error{Code: ladder.CodeInvalidArgument, RPCCode: -32600}); got != -32600 {
		t.Errorf("an error's own RPCCode answers %d, want -32600", got)
	}
}

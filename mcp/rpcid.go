package mcp

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/mcpwire"
)

// checkID refuses, as a bad argument answered with -32600, a request id
// that would not come back unchanged (mcpwire.CheckID says which): the
// front door echoes an id as the bytes it was sent, go-sdk as its float64
// reading, so a client matching answers by id would lose them, and the same
// request would get one id back on a refusal and another on success. Every
// id that passes comes back with the same value on every path.
func checkID(id json.RawMessage) *ladder.Error {
	ierr := mcpwire.CheckID(id)
	if ierr == nil {
		return nil
	}
	return &ladder.Error{Code: ladder.CodeInvalidArgument, Message: "The request id would not come back unchanged.", Hint: ierr.Error(),
		RPCCode: jsonrpc.CodeInvalidRequest, Data: map[string]any{"field": "id"}}
}

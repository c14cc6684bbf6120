package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/bufpool"
	"github.com/ladderhq/ladder/internal/mcpwire"
)

// The tools/call fast path.
//
// In stateless mode go-sdk v1.8 connects a session, starts a JSON-RPC
// connection and decodes the body about eleven times per request, each
// decode with a fresh 32 KiB buffer (BENCHMARKS.md, "Why the go-sdk is
// slow"): a bare go-sdk server answers a no-op tool at about 2k calls/s on
// two cores where a plain handler answers 20k. Nearly all of an agent's
// traffic is tools/call, so the front door answers the plainest form of it
// itself — the form whose every SDK check passes trivially, under every
// protocol version — and hands everything else (initialize, tools/list,
// ping, notifications, progress tokens and other _meta, tasks, unusual
// headers or ids) to the SDK.
//
// The answer is the SDK's own: the same tool run (toolRun), the same
// sdk.CallToolResult marshalled by its own MarshalJSON, and the same
// JSON-RPC framing, headers and status. Which calls qualify
// (mcpwire.PlainCall) and how the answer is framed (mcpwire.ToolResponse)
// are the wire package's, shared with the upstream client's direct path.
// TestFastPathMatchesSDK sends every case through both paths and compares
// the bytes; TestSDKVersionIsPinned fails when go-sdk changes version,
// naming the tests to re-run.

// serveCall answers an eligible tools/call as the SDK would.
func (h *Handler) serveCall(ctx context.Context, w http.ResponseWriter, r *http.Request, run toolRun, p ladder.Principal, id json.RawMessage, args json.RawMessage) {
	h.fastCalls.Add(1)
	h.answerCall(ctx, w, r, run, p, id, args)
}

// answers holds the buffers answerCall frames answers in: each is written
// once to the ResponseWriter, which keeps no reference to it (io.Writer's
// contract), so the next call can reuse it. A rare answer past 64 KiB is
// not kept.
var answers = bufpool.New(4<<10, 64<<10)

// answerCall runs a tools/call and writes its answer in the SDK's framing.
func (h *Handler) answerCall(ctx context.Context, w http.ResponseWriter, r *http.Request, run toolRun, p ladder.Principal, id json.RawMessage, args json.RawMessage) {
	stateless := mcpwire.HeaderValue(r.Header, mcpwire.HeaderProtocolVersion) == mcpwire.StatelessProtocol
	res, err := run(ctx, p, args)
	if kr, ok := err.(keyRefused); ok {
		h.refuseKey(w, r, id, kr.e)
		return
	}
	if err == nil && res != nil {
		if res.Content == nil {
			res.Content = []sdk.Content{} // as Server.callTool: never "null"
		}
		if stateless && res.Meta[sdk.MetaKeyServerInfo] == nil {
			// SEP-2575: a server names itself in every result's _meta.
			if res.Meta == nil {
				res.Meta = sdk.Meta{}
			}
			res.Meta[sdk.MetaKeyServerInfo] = h.impl
		}
	}
	bp := answers.Get()
	body, merr := mcpwire.AppendToolResponse(*bp, id, res, err, stateless)
	defer answers.Put(bp, body)
	if merr != nil {
		h.log.ErrorContext(ctx, "encoding a tools/call answer", "err", merr)
		h.writeRPCError(w, http.StatusInternalServerError, id, &ladder.Error{Code: ladder.CodeInternal, Message: "The server could not frame its answer to this call.", Hint: "retry; if it persists, report it with the time of the call"})
		return
	}
	// Header.Set twice, in one allocation and without canonicalising the
	// names; each value is a slice of its own (capacity 1), as Set makes.
	vals := []string{"no-cache, no-transform", mcpwire.ContentTypeJSON}
	hdr := w.Header()
	hdr["Cache-Control"], hdr["Content-Type"] = vals[0:1:1], vals[1:2:2]
	if stateless {
		// SEP-2575 maps protocol-level errors to HTTP statuses
		// (the SDK's extractErrorStatus).
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			switch je.Code {
			case jsonrpc.CodeMethodNotFound:
				w.WriteHeader(http.StatusNotFound)
			case jsonrpc.CodeInvalidParams, sdk.CodeUnsupportedProtocolVersion, sdk.CodeMissingRequiredClientCapabilities:
				w.WriteHeader(http.StatusBadRequest)
			}
		}
	}
	_, _ = w.Write(body)
}

package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder"
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
// JSON-RPC framing, headers and status. TestFastPathMatchesSDK sends every
// case through both paths and compares the bytes; TestSDKVersionIsPinned
// fails when go-sdk changes version, naming the tests to re-run.

// legacyProtocol are the protocol versions before 2026-07-28 whose
// tools/call the fast path answers; the SDK checks neither Mcp-* headers
// nor _meta for them. An absent header means 2025-03-26 to the SDK.
var legacyProtocol = map[string]bool{"": true, "2024-11-05": true, "2025-03-26": true, "2025-06-18": true, "2025-11-25": true}

// statelessProtocol is the 2026-07-28 protocol (SEP-2575): every request
// carries its protocol version and client capabilities in _meta and
// repeats its method and tool name in Mcp-Method and Mcp-Name.
const statelessProtocol = "2026-07-28"

// fastEligible reports whether the SDK would accept this tools/call without
// any check of its own failing or changing the answer. env and cp passed
// the front door's strict parse, which refuses keys other than jsonrpc, id,
// method and params in the envelope and name, arguments, _meta and task in
// the params, duplicate and case-variant keys, and invalid UTF-8.
func fastEligible(r *http.Request, env envelope, cp callParams) bool {
	switch v := r.Header.Get("Mcp-Protocol-Version"); {
	case legacyProtocol[v]:
		if len(cp.Meta) > 0 {
			return false
		}
	case v == statelessProtocol:
		if !statelessMetaOK(r, cp) {
			return false
		}
	default:
		return false
	}
	if r.Header.Get("Content-Type") != "application/json" || len(r.Header.Values("Last-Event-ID")) > 0 {
		return false
	}
	if jsonOK, streamOK := accepts(r.Header.Values("Accept")); !jsonOK || !streamOK {
		return false
	}
	// The SDK's DNS rebinding check: loopback listener, non-loopback Host.
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil && loopbackAddr(la.String()) && !loopbackAddr(r.Host) {
		return false
	}
	if len(cp.Task) > 0 {
		return false
	}
	return simpleID(env.ID)
}

// statelessMetaOK reports whether a 2026-07-28 tools/call passes the SDK's
// checks: Mcp-Method and Mcp-Name equal to the body, no Mcp-Param-*
// headers (no ladder tool binds one), and a _meta holding the protocol
// version equal to the header, client capabilities of the right shape, and
// optionally client info and a log level — nothing else.
func statelessMetaOK(r *http.Request, cp callParams) bool {
	if r.Header.Get("Mcp-Method") != "tools/call" || r.Header.Get("Mcp-Name") != cp.Name {
		return false
	}
	for k := range r.Header {
		if len(k) > len("Mcp-Param-") && strings.EqualFold(k[:len("Mcp-Param-")], "Mcp-Param-") {
			return false
		}
	}
	var meta map[string]json.RawMessage
	if len(cp.Meta) == 0 || json.Unmarshal(cp.Meta, &meta) != nil {
		return false
	}
	var version string
	if json.Unmarshal(meta[sdk.MetaKeyProtocolVersion], &version) != nil || version != statelessProtocol {
		return false
	}
	caps, ok := meta[sdk.MetaKeyClientCapabilities]
	if !ok || !isObject(caps) || json.Unmarshal(caps, new(clientCapabilities)) != nil {
		return false
	}
	for k, v := range meta {
		switch k {
		case sdk.MetaKeyProtocolVersion, sdk.MetaKeyClientCapabilities:
		case sdk.MetaKeyClientInfo:
			if !isObject(v) || json.Unmarshal(v, new(sdk.Implementation)) != nil {
				return false
			}
		//lint:ignore SA1019 clients of 2026-07-28 still send it during the deprecation window, and the SDK accepts it
		case sdk.MetaKeyLogLevel:
			// The SDK ignores a log level it cannot read; no ladder tool logs.
		default:
			return false // progress tokens and the like: the SDK's business
		}
	}
	return true
}

// clientCapabilities is the shape the SDK reads 2026-07-28 client
// capabilities into (its clientCapabilitiesV2).
type clientCapabilities struct {
	sdk.ClientCapabilities
	//lint:ignore SA1019 the SDK still reads roots from 2026-07-28 clients during the deprecation window; the fast path must accept what it accepts
	Roots *sdk.RootCapabilities `json:"roots,omitempty"`
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// accepts is the SDK's reading of the Accept header (streamableAccepts).
func accepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for _, raw := range strings.Split(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// loopbackAddr is the SDK's loopback test for a host or host:port.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// simpleID reports whether the request id is one the SDK echoes byte for
// byte: an integer of at most 15 digits (the SDK reads ids as float64, so
// longer ones come back rounded), or a string of printable ASCII with
// nothing to escape.
func simpleID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false // a notification: the SDK answers 202
	}
	if id[0] == '"' {
		if len(id) < 2 || id[len(id)-1] != '"' {
			return false
		}
		for _, c := range id[1 : len(id)-1] {
			if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
				return false
			}
		}
		return true
	}
	digits := id
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(id) > 1) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// serveCall answers an eligible tools/call as the SDK would.
func (h *Handler) serveCall(ctx context.Context, w http.ResponseWriter, r *http.Request, run toolRun, p ladder.Principal, id json.RawMessage, args json.RawMessage) {
	h.fastCalls.Add(1)
	h.answerCall(ctx, w, r, run, p, id, args)
}

// answerCall runs a tools/call and writes its answer in the SDK's framing.
func (h *Handler) answerCall(ctx context.Context, w http.ResponseWriter, r *http.Request, run toolRun, p ladder.Principal, id json.RawMessage, args json.RawMessage) {
	stateless := r.Header.Get("Mcp-Protocol-Version") == statelessProtocol
	res, err := run(ctx, p, args)
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
	body, merr := frame(id, res, err, stateless)
	if merr != nil {
		h.log.ErrorContext(ctx, "encoding a tools/call answer", "err", merr)
		h.writeRPCError(w, http.StatusInternalServerError, id, &ladder.Error{Code: ladder.CodeInternal, Message: "INTERNAL", Hint: "retry; if it persists, report it with the time of the call"})
		return
	}
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Content-Type", "application/json")
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

// wireResponse is the SDK's JSON-RPC response framing (jsonrpc2's
// wireCombined as a response: the fields in its order).
type wireResponse struct {
	VersionTag string          `json:"jsonrpc"`
	ID         json.RawMessage `json:"id,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *wireError      `json:"error,omitempty"`
}

type wireError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// frame encodes a tool's answer as the SDK does: the result marshalled by
// encoding/json (which runs CallToolResult.MarshalJSON), the envelope by an
// encoder that does not escape HTML, without the trailing newline. For a
// 2026-07-28 client the SDK marks a result complete (resultType, the last
// field CallToolResult.MarshalJSON writes); the field is unexported, so it
// is appended here.
func frame(id json.RawMessage, res *sdk.CallToolResult, callErr error, stateless bool) ([]byte, error) {
	msg := wireResponse{VersionTag: "2.0", ID: id}
	if callErr != nil {
		// As jsonrpc2's toWireError.
		var je *jsonrpc.Error
		switch {
		case errors.As(callErr, &je) && je == callErr:
			msg.Error = &wireError{Code: je.Code, Message: je.Message, Data: je.Data}
		case je != nil:
			msg.Error = &wireError{Code: je.Code, Message: callErr.Error()}
		default:
			msg.Error = &wireError{Message: callErr.Error()}
		}
	} else {
		raw, err := json.Marshal(res)
		if err != nil {
			return nil, err
		}
		if stateless && len(raw) > 2 && raw[len(raw)-1] == '}' {
			raw = append(raw[:len(raw)-1:len(raw)-1], `,"resultType":"complete"}`...)
		}
		msg.Result = raw
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&msg); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

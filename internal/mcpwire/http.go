package mcpwire

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Header names of MCP's streamable HTTP transport.
const (
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderSessionID       = "Mcp-Session-Id"
	// HeaderMethod and HeaderName repeat a 2026-07-28 request's method and
	// tool name; HeaderParamPrefix starts the headers that repeat bound
	// arguments.
	HeaderMethod      = "Mcp-Method"
	HeaderName        = "Mcp-Name"
	HeaderParamPrefix = "Mcp-Param-"
	// HeaderLastEventID resumes an event stream; a request that carries it
	// is go-sdk's to answer. Written in canonical form ("Last-Event-ID" on
	// the wire: header names are case-insensitive) so HeaderValue can look
	// it up.
	HeaderLastEventID = "Last-Event-Id"
)

// HeaderValue is h.Get(key) for a key already in canonical form
// (textproto.CanonicalMIMEHeaderKey(key) == key), as every header name this
// package and its callers look up is: it skips Get's canonicalising of key,
// which costs a request ~450 instructions a lookup and a dozen lookups on
// every MCP call (BENCHMARKS.md, "Issue 22 (session 16)"). net/http stores
// a request's header names canonicalised, so the answer is Get's.
func HeaderValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Media types of the transport, and the Accept header a client sends: it
// takes the answer as one JSON body or as an event stream.
const (
	ContentTypeJSON        = "application/json"
	ContentTypeEventStream = "text/event-stream"
	Accept                 = ContentTypeJSON + ", " + ContentTypeEventStream
)

// StatelessProtocol is the 2026-07-28 protocol (SEP-2575): every request
// carries its protocol version and client capabilities in _meta and
// repeats its method and tool name in Mcp-Method and Mcp-Name.
const StatelessProtocol = "2026-07-28"

// PlainProtocol reports whether version, an Mcp-Protocol-Version header's
// value, is a protocol before 2026-07-28, whose tools/call needs no _meta
// and no Mcp-Method or Mcp-Name headers, and whose headers and _meta
// go-sdk's server does not check. An absent header ("") means 2025-03-26
// to go-sdk. It is a switch, not a table, so no caller can change it.
func PlainProtocol(version string) bool {
	switch version {
	case "", "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25":
		return true
	}
	return false
}

// NewPost is a client's POST of one JSON-RPC message on a session, with
// the headers go-sdk's client sends: the media types, the negotiated
// protocol version, and the session id when the server issued one.
func NewPost(ctx context.Context, url string, body []byte, version, session string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	// Header.Set for each, without canonicalising the (canonical) names
	// and in one allocation; each value keeps a slice of its own.
	vals := []string{ContentTypeJSON, Accept, version, session}
	h := req.Header
	h["Content-Type"], h["Accept"], h[HeaderProtocolVersion] = vals[0:1:1], vals[1:2:2], vals[2:3:3]
	if session != "" {
		h[HeaderSessionID] = vals[3:4:4]
	}
	return req, nil
}

// Accepts is go-sdk's reading of a request's Accept header values
// (streamableAccepts): whether they take a JSON body and an event stream.
// It walks the values with strings.Cut where go-sdk splits them, so no
// slice is made; each token is read the same way.
func Accepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for value != "" {
			var raw string
			raw, value, _ = strings.Cut(value, ",")
			base, _, _ := strings.Cut(raw, ";")
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

// PlainCall reports whether go-sdk's stateless server would accept this
// tools/call, with request id id and params cp, without any check of its
// own failing or changing the answer — the calls a server may answer
// without go-sdk. id and cp are assumed to have passed a strict parse that
// refuses unknown keys, duplicate and case-variant keys, and invalid
// UTF-8.
func PlainCall(r *http.Request, id json.RawMessage, cp CallParams) bool {
	switch v := HeaderValue(r.Header, HeaderProtocolVersion); {
	case PlainProtocol(v):
		if len(cp.Meta) > 0 {
			return false
		}
	case v == StatelessProtocol:
		if !statelessMetaOK(r, cp) {
			return false
		}
	default:
		return false
	}
	if HeaderValue(r.Header, "Content-Type") != ContentTypeJSON || len(r.Header[HeaderLastEventID]) > 0 {
		return false
	}
	if jsonOK, streamOK := Accepts(r.Header["Accept"]); !jsonOK || !streamOK {
		return false
	}
	// go-sdk's DNS rebinding check: loopback listener, non-loopback Host.
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil && loopbackAddr(la.String()) && !loopbackAddr(r.Host) {
		return false
	}
	if len(cp.Task) > 0 {
		return false
	}
	return SimpleID(id)
}

// statelessMetaOK reports whether a 2026-07-28 tools/call passes go-sdk's
// checks: Mcp-Method and Mcp-Name equal to the body, no Mcp-Param-*
// headers (no ladder tool binds one), and a _meta holding the protocol
// version equal to the header, client capabilities of the right shape, and
// optionally client info and a log level — nothing else.
func statelessMetaOK(r *http.Request, cp CallParams) bool {
	if HeaderValue(r.Header, HeaderMethod) != "tools/call" || HeaderValue(r.Header, HeaderName) != cp.Name {
		return false
	}
	for k := range r.Header {
		if len(k) > len(HeaderParamPrefix) && strings.EqualFold(k[:len(HeaderParamPrefix)], HeaderParamPrefix) {
			return false
		}
	}
	var meta map[string]json.RawMessage
	if len(cp.Meta) == 0 || json.Unmarshal(cp.Meta, &meta) != nil {
		return false
	}
	var version string
	if json.Unmarshal(meta[sdk.MetaKeyProtocolVersion], &version) != nil || version != StatelessProtocol {
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
			// go-sdk ignores a log level it cannot read; no ladder tool logs.
		default:
			return false // progress tokens and the like: go-sdk's business
		}
	}
	return true
}

// clientCapabilities is the shape go-sdk reads 2026-07-28 client
// capabilities into (its clientCapabilitiesV2).
type clientCapabilities struct {
	sdk.ClientCapabilities
	//lint:ignore SA1019 the SDK still reads roots from 2026-07-28 clients during the deprecation window; a plain call must be what it accepts
	Roots *sdk.RootCapabilities `json:"roots,omitempty"`
}

// isObject reports whether raw is a JSON object, which json.Unmarshal
// does not check when it fills a struct from null.
func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// loopbackAddr is go-sdk's loopback test for a host or host:port.
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

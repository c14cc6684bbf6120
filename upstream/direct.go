package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/ladderhq/ladder/internal/mcpwire"
	"github.com/ladderhq/ladder/internal/tracing"
)

// mcpSession is one upstream MCP server's session: go-sdk's, which opened
// it and which the SDK path calls through, and what a plain JSON-RPC POST
// on the same session needs.
type mcpSession struct {
	cs  *sdk.ClientSession
	url string
	// hdr adds the executor's headers to the session's own posts, which hc
	// (on hdr's base transport) then sends as they are.
	hdr headerTransport
	hc  *http.Client
	// version is the negotiated protocol; direct is whether tools/call goes
	// as a plain POST (protocols up to 2025-11-25, whose requests need no
	// _meta or Mcp-Method/Mcp-Name headers).
	version string
	direct  bool
	seq     atomic.Int64
}

func newMCPSession(cs *sdk.ClientSession, url string, hdr headerTransport, sdkOnly bool) *mcpSession {
	s := &mcpSession{cs: cs, url: url, hdr: hdr, hc: &http.Client{Transport: hdr.base}}
	if r := cs.InitializeResult(); r != nil {
		s.version = r.ProtocolVersion
	}
	s.direct = !sdkOnly && s.version != "" && mcpwire.PlainProtocol(s.version)
	return s
}

// toolMessage is any JSON-RPC message the server may send while a call is
// open: the call's response, a notification, or a request of its own.
type toolMessage = mcpwire.Message[*mcpwire.ToolResult]

// maxAnswer bounds one answer (or one event) of an upstream tool.
const maxAnswer = 4 << 20

// errSession marks a failure that says the session is unusable (the server
// forgot it, or answered outside the protocol): the pool drops it so the
// next call opens a new one.
var errSession = errors.New("the upstream session is no longer usable")

// errSessionGone is the server's 404 for a session it no longer knows
// (it restarted, or expired the session). The spec has the client open a
// new session; the call did not run, so it is safe to send it again there.
var errSessionGone = fmt.Errorf("%w: the server no longer knows the session", errSession)

// callTool sends tools/call as one JSON-RPC POST on the session, as go-sdk's
// client would, and reads the answer from a JSON body or an event stream.
// go-sdk's client costs about a fifth of a proxied call (a JSON-RPC
// connection, a goroutine per answer, and a 32 KiB buffer per decode); this
// is the same exchange without them. Notifications on the stream are
// skipped; a request the server sends meanwhile is answered (ping with an
// empty result, anything else "method not found": ladder offers no client
// features). TestDirectCallMatchesSDK compares it with go-sdk's client, and
// mcp's TestSDKVersionIsPinned fails when go-sdk changes version.
func (s *mcpSession) callTool(ctx context.Context, tool string, args json.RawMessage, meta map[string]string) (*mcpwire.ToolResult, error) {
	id := mcpwire.ClientID(s.seq.Add(1))
	var rawMeta json.RawMessage
	if len(meta) > 0 {
		var err error
		if rawMeta, err = json.Marshal(meta); err != nil {
			return nil, err
		}
	}
	if sp := trace.SpanFromContext(ctx); sp.IsRecording() {
		sp.SetAttributes(tracing.JSONRPCRequestID.String(string(id)))
	}
	body, err := mcpwire.CallRequestMeta(id, tool, args, rawMeta)
	if err != nil {
		return nil, err
	}
	resp, err := s.post(ctx, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && s.cs.ID() != "" {
		return nil, fmt.Errorf("%w (HTTP 404 for session %s)", errSessionGone, s.cs.ID())
	}
	ct := mcpwire.HeaderValue(resp.Header, "Content-Type")
	if ct != mcpwire.ContentTypeJSON && ct != mcpwire.ContentTypeEventStream {
		ct, _, _ = mime.ParseMediaType(ct) // parameters, case, spacing
	}
	if resp.StatusCode/100 != 2 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var m toolMessage
		if ct == mcpwire.ContentTypeJSON && json.Unmarshal(data, &m) == nil && m.Error != nil {
			return nil, m.Error
		}
		return nil, fmt.Errorf("%w: HTTP %d: %s", errSession, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	switch ct {
	case mcpwire.ContentTypeJSON:
		data, err := readAll(resp.Body, resp.ContentLength, maxAnswer+1)
		if err != nil {
			return nil, fmt.Errorf("%w: reading the answer: %v", errSession, err)
		}
		if len(data) > maxAnswer {
			return nil, fmt.Errorf("the answer is over %d MiB", maxAnswer>>20)
		}
		m, err := decodeAnswer(data)
		if err != nil {
			return nil, fmt.Errorf("%w: the answer is not JSON-RPC: %v", errSession, err)
		}
		return s.answer(m, id)
	case mcpwire.ContentTypeEventStream:
		return s.readStream(ctx, resp.Body, id)
	}
	return nil, fmt.Errorf("%w: unexpected content type %q", errSession, ct)
}

// presizeMax is the largest stated length readAll allocates for before
// the bytes arrive: an upstream that states 4 MiB and then sends nothing
// would otherwise hold 4 MiB of ladder's memory a call until its timeout.
// Tool answers are a few KiB; longer ones grow as ReadAll grows them.
const presizeMax = 64 << 10

// readAll is io.ReadAll(io.LimitReader(r, limit)) in one allocation when
// the body says its length (size, -1 when unknown) and it is at most
// presizeMax: ReadAll starts at 512 bytes and copies the answer each time
// it grows. A body longer than it said is read on, up to limit, as
// ReadAll would.
func readAll(r io.Reader, size, limit int64) ([]byte, error) {
	if size <= 0 || size >= limit || size > presizeMax {
		return io.ReadAll(io.LimitReader(r, limit))
	}
	var b bytes.Buffer
	b.Grow(int(size) + bytes.MinRead) // room for the body and the read that finds its end
	_, err := b.ReadFrom(io.LimitReader(r, limit))
	return b.Bytes(), err
}

// post sends one JSON-RPC message on the session.
func (s *mcpSession) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := mcpwire.NewPost(ctx, s.url, body, s.version, s.cs.ID())
	if err != nil {
		return nil, err
	}
	s.hdr.add(req)
	return s.hc.Do(req)
}

// answer returns the call's result from its response message; ids are
// matched by their bytes, since the client's own (mcpwire.ClientID) come
// back unchanged.
func (s *mcpSession) answer(m toolMessage, id json.RawMessage) (*mcpwire.ToolResult, error) {
	if !bytes.Equal(m.ID, id) {
		return nil, fmt.Errorf("%w: the answer is for request %s, not %s", errSession, m.ID, id)
	}
	if m.Error != nil {
		return nil, m.Error
	}
	if m.Result == nil {
		return nil, fmt.Errorf("%w: the answer has neither result nor error", errSession)
	}
	return m.Result, nil
}

// readStream reads server-sent events until the call's response.
func (s *mcpSession) readStream(ctx context.Context, r io.Reader, id json.RawMessage) (*mcpwire.ToolResult, error) {
	events := mcpwire.NewEventReader(r, maxAnswer)
	for {
		data, err := events.Next()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("the upstream's event stream ended before the answer: %w", err)
		}
		m, err := decodeAnswer(data)
		if err != nil {
			return nil, fmt.Errorf("%w: an event is not JSON-RPC: %v", errSession, err)
		}
		switch {
		case m.IsRequest():
			if err := s.reply(ctx, m); err != nil {
				return nil, err
			}
		case m.Method != "": // a notification: progress, logging
		default:
			return s.answer(m, id)
		}
	}
}

// reply answers a request the server sent in the middle of a call.
func (s *mcpSession) reply(ctx context.Context, m toolMessage) error {
	msg := mcpwire.Message[json.RawMessage]{JSONRPC: mcpwire.Version, ID: m.ID}
	if m.Method == "ping" {
		msg.Result = json.RawMessage(`{}`)
	} else {
		msg.Error = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: ladder offers no client features"}
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	resp, err := s.post(ctx, body)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

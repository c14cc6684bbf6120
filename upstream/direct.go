package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpSession is one upstream MCP server's session: go-sdk's, which opened
// it and which the SDK path calls through, and what a plain JSON-RPC POST
// on the same session needs.
type mcpSession struct {
	cs  *sdk.ClientSession
	url string
	hc  *http.Client // carries the executor's headers
	// version is the negotiated protocol; direct is whether tools/call goes
	// as a plain POST (protocols up to 2025-11-25, whose requests need no
	// _meta or Mcp-Method/Mcp-Name headers).
	version string
	direct  bool
	seq     atomic.Int64
}

func newMCPSession(cs *sdk.ClientSession, url string, hc *http.Client, sdkOnly bool) *mcpSession {
	s := &mcpSession{cs: cs, url: url, hc: hc}
	if r := cs.InitializeResult(); r != nil {
		s.version = r.ProtocolVersion
	}
	s.direct = !sdkOnly && s.version != "" && s.version <= SessionProtocolVersion
	return s
}

// toolAnswer is what a tools/call answered, read the same way on both
// paths.
type toolAnswer struct {
	Content           []contentBlock  `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

// contentBlock is one item of a tool's content; only text is kept.
type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// rpcMessage is any JSON-RPC message the server may send while a call is
// open: the call's response, a notification, or a request of its own.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result *toolAnswer     `json:"result"`
	Error  *jsonrpc.Error  `json:"error"` // go-sdk's own, so one errors.As finds it from either path
}

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
func (s *mcpSession) callTool(ctx context.Context, tool string, args json.RawMessage) (*toolAnswer, error) {
	id := `"ladder-` + strconv.FormatInt(s.seq.Add(1), 10) + `"`
	body, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  any             `json:"params"`
	}{"2.0", json.RawMessage(id), "tools/call", struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}{tool, args}})
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
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode/100 != 2 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var m rpcMessage
		if ct == "application/json" && json.Unmarshal(data, &m) == nil && m.Error != nil {
			return nil, m.Error
		}
		return nil, fmt.Errorf("%w: HTTP %d: %s", errSession, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	switch ct {
	case "application/json":
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
		if err != nil {
			return nil, fmt.Errorf("%w: reading the answer: %v", errSession, err)
		}
		if len(data) > maxAnswer {
			return nil, fmt.Errorf("the answer is over %d MiB", maxAnswer>>20)
		}
		var m rpcMessage
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("%w: the answer is not JSON-RPC: %v", errSession, err)
		}
		return s.answer(m, id)
	case "text/event-stream":
		return s.readStream(ctx, resp.Body, id)
	}
	return nil, fmt.Errorf("%w: unexpected content type %q", errSession, ct)
}

// post sends one JSON-RPC message on the session.
func (s *mcpSession) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", s.version)
	if sid := s.cs.ID(); sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	return s.hc.Do(req)
}

// answer returns the call's result from its response message.
func (s *mcpSession) answer(m rpcMessage, id string) (*toolAnswer, error) {
	if string(m.ID) != id {
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
func (s *mcpSession) readStream(ctx context.Context, r io.Reader, id string) (*toolAnswer, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 16<<10), maxAnswer)
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) > 0 {
			if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.Write(bytes.TrimPrefix(v, []byte(" ")))
			}
			continue
		}
		if data.Len() == 0 { // the end of an event without data
			continue
		}
		var m rpcMessage
		if err := json.Unmarshal(data.Bytes(), &m); err != nil {
			return nil, fmt.Errorf("%w: an event is not JSON-RPC: %v", errSession, err)
		}
		data.Reset()
		switch {
		case m.Method != "" && len(m.ID) > 0:
			if err := s.reply(ctx, m); err != nil {
				return nil, err
			}
		case m.Method != "": // a notification: progress, logging
		default:
			return s.answer(m, id)
		}
	}
	err := sc.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return nil, fmt.Errorf("the upstream's event stream ended before the answer: %w", err)
}

// reply answers a request the server sent in the middle of a call.
func (s *mcpSession) reply(ctx context.Context, m rpcMessage) error {
	msg := map[string]any{"jsonrpc": "2.0", "id": m.ID}
	if m.Method == "ping" {
		msg["result"] = struct{}{}
	} else {
		msg["error"] = jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: ladder offers no client features"}
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

package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/upstream"
)

type echoArgs struct {
	Bill    string `json:"bill_id" jsonschema:"the bill"`
	Program string `json:"program" jsonschema:"the scope"`
	Amount  any    `json:"amount,omitempty" jsonschema:"an amount"`
}

type echoOut struct {
	Bill    string `json:"bill_id"`
	Program string `json:"program"`
	Amount  any    `json:"amount,omitempty"`
}

// upstreamServer is a go-sdk MCP server on a loopback port, with what it
// saw of the tools/call requests it received.
type upstreamServer struct {
	URL  string
	h    atomic.Pointer[http.Handler]
	opt  upstreamOptions
	runs atomic.Int64 // echo's runs

	mu       sync.Mutex
	versions []string // MCP-Protocol-Version of each tools/call
	ids      []string // JSON-RPC id of each tools/call
	bodies   []string // each tools/call as sent
	headers  []string // each request's method with its X-Tenant and Authorization headers
}

type upstreamOptions struct {
	versions []string // protocols it accepts (all of go-sdk's when empty)
	stateful bool     // sessions and event-stream answers, not stateless JSON
}

// newUpstream starts a server with the tools echo (structured result), text
// (text only), fail (a tool error) and huge (5 MiB of text).
func newUpstream(t *testing.T, opt upstreamOptions) *upstreamServer {
	t.Helper()
	u := &upstreamServer{opt: opt}
	u.reset()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		u.mu.Lock()
		u.headers = append(u.headers, fmt.Sprintf("%s %s: %s, %s", r.Method, m.Method, r.Header.Get("X-Tenant"), r.Header.Get("Authorization")))
		u.mu.Unlock()
		if m.Method == "tools/call" {
			u.mu.Lock()
			u.versions = append(u.versions, r.Header.Get("Mcp-Protocol-Version"))
			u.ids = append(u.ids, string(m.ID))
			u.bodies = append(u.bodies, string(body))
			u.mu.Unlock()
		}
		(*u.h.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u.URL = srv.URL
	return u
}

// reset replaces the server's handler with a new one, which knows none of
// the sessions the old one opened (as after a restart).
func (u *upstreamServer) reset() {
	s := sdk.NewServer(&sdk.Implementation{Name: "ledger", Version: "1"}, &sdk.ServerOptions{SupportedProtocolVersions: u.opt.versions})
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo the bill."},
		func(ctx context.Context, req *sdk.CallToolRequest, in echoArgs) (*sdk.CallToolResult, echoOut, error) {
			u.runs.Add(1)
			return nil, echoOut(in), nil
		})
	s.AddTool(&sdk.Tool{Name: "text", Description: "Answer in text.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "posted"}, &sdk.TextContent{Text: "ref 7"}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "fail", Description: "Fail.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "bill B-7 is locked"}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "huge", Description: "Answer 5 MiB.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("x", 5<<20)}}}, nil
		})
	var h http.Handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s },
		&sdk.StreamableHTTPOptions{Stateless: !u.opt.stateful, JSONResponse: !u.opt.stateful})
	u.h.Store(&h)
}

// TestExecutorHeadersReachTheUpstream: the executor's headers, written in
// the config and read from the environment, go with every request of the
// session, whichever client sends the call: go-sdk's, or the plain POST
// that carries tools/call for the protocols that allow it.
func TestExecutorHeadersReachTheUpstream(t *testing.T) {
	for _, tt := range []struct {
		name    string
		sdkOnly bool
		opt     upstreamOptions
	}{
		{"plain POST", false, upstreamOptions{}},
		{"plain POST, stateful", false, upstreamOptions{stateful: true}},
		{"go-sdk's client", true, upstreamOptions{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := newUpstream(t, tt.opt)
			getenv := func(k string) string {
				if k == "LEDGER_TOKEN" {
					return "Bearer up-secret"
				}
				return ""
			}
			p := upstream.NewPool(getenv, nil)
			if tt.sdkOnly {
				p = upstream.SDKOnly(p)
			}
			defer p.Close()
			x := ladder.Executor{Kind: ladder.ExecMCP, URL: u.URL, Tool: "echo", Headers: map[string]string{"X-Tenant": "acme"},
				HeadersFromEnv: map[string]string{"Authorization": "LEDGER_TOKEN"}}
			for range 2 {
				if _, err := p.Execute(context.Background(), x, upstream.Request{CallID: "c1", Payload: json.RawMessage(`{"bill_id":"B-7"}`),
					Scope: map[string]string{"program": "p-1"}}); err != nil {
					t.Fatalf("Execute: %v", err)
				}
			}
			u.mu.Lock()
			seen := slices.Clone(u.headers)
			u.mu.Unlock()
			calls := 0
			for _, h := range seen {
				if !strings.HasSuffix(h, ": acme, Bearer up-secret") {
					t.Errorf("request %q, want X-Tenant acme and the Authorization from the environment", h)
				}
				if strings.HasPrefix(h, "POST tools/call:") {
					calls++
				}
			}
			if calls != 2 {
				t.Errorf("requests %q: %d tools/call, want 2", seen, calls)
			}
		})
	}
}

func (u *upstreamServer) seen() (versions, ids []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.versions), slices.Clone(u.ids)
}

func execute(p *upstream.Pool, url, tool, payload string) (upstream.Result, error) {
	x := ladder.Executor{Kind: ladder.ExecMCP, URL: url, Tool: tool}
	return p.Execute(context.Background(), x, upstream.Request{CallID: "c1", Payload: json.RawMessage(payload),
		Scope: map[string]string{"program": "p-1"}})
}

func call(t *testing.T, p *upstream.Pool, url string) {
	t.Helper()
	res, err := execute(p, url, "echo", `{"bill_id":"B-7"}`)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	var out echoOut
	if err := json.Unmarshal(res.Body, &out); err != nil || out != (echoOut{Bill: "B-7", Program: "p-1"}) {
		t.Fatalf("result %s (%v), want the tool's structured content with the payload and the scope", res.Body, err)
	}
}

// The pool asks an upstream for protocol 2025-11-25 first: it costs less per
// call than 2026-07-28 on both ends and says the same for a tools/call.
func TestSessionSpeaksTheOlderProtocol(t *testing.T) {
	u := newUpstream(t, upstreamOptions{})
	p := upstream.NewPool(nil, nil)
	defer p.Close()
	for range 3 {
		call(t, p, u.URL)
	}
	if got, _ := u.seen(); !slices.Equal(got, []string{upstream.SessionProtocolVersion, upstream.SessionProtocolVersion, upstream.SessionProtocolVersion}) {
		t.Fatalf("tools/call MCP-Protocol-Version headers %q, want %s on each of the 3 calls", got, upstream.SessionProtocolVersion)
	}
}

// A server that speaks only the newest protocol is still reached (through
// go-sdk's client, which adds what that protocol asks of each request).
func TestSessionFallsBackToTheNewestProtocol(t *testing.T) {
	u := newUpstream(t, upstreamOptions{versions: []string{"2026-07-28"}})
	p := upstream.NewPool(nil, nil)
	defer p.Close()
	call(t, p, u.URL)
	if got, _ := u.seen(); len(got) != 1 || got[0] != "2026-07-28" {
		t.Fatalf("tools/call MCP-Protocol-Version headers %q, want the one call at 2026-07-28", got)
	}
}

// A tools/call sent as a plain JSON-RPC POST on the session gets the same
// outcome as through go-sdk's client, from a stateless server answering
// JSON and from a stateful one answering with an event stream.
func TestDirectCallMatchesSDK(t *testing.T) {
	calls := []struct{ tool, payload string }{
		{"echo", `{"bill_id":"B-7"}`},
		{"echo", `{"bill_id":"<B&7>","amount":12.5}`},
		{"text", `{}`},
		{"fail", `{}`},
		{"nosuchtool", `{}`},
		{"echo", `{"bill_id":7}`}, // fails the tool's input schema
	}
	for _, opt := range []upstreamOptions{{}, {stateful: true}} {
		name := map[bool]string{false: "stateless JSON", true: "stateful event stream"}[opt.stateful]
		t.Run(name, func(t *testing.T) {
			u := newUpstream(t, opt)
			direct, viaSDK := upstream.NewPool(nil, nil), upstream.SDKOnly(upstream.NewPool(nil, nil))
			defer direct.Close()
			defer viaSDK.Close()
			for _, c := range calls {
				got, gerr := execute(direct, u.URL, c.tool, c.payload)
				want, werr := execute(viaSDK, u.URL, c.tool, c.payload)
				if (gerr == nil) != (werr == nil) {
					t.Fatalf("%s %s: direct %s, %v; go-sdk %s, %v", c.tool, c.payload, got.Body, gerr, want.Body, werr)
				}
				if werr != nil {
					// go-sdk wraps the server's message ("calling
					// \"tools/call\": …"); the direct path keeps it bare.
					g, w := ladder.AsError(gerr), ladder.AsError(werr)
					if g.Code != w.Code || g.Message != w.Message || (g.Err == nil) != (w.Err == nil) ||
						g.Err != nil && !strings.Contains(w.Err.Error(), g.Err.Error()) {
						t.Errorf("%s %s: direct %v; go-sdk %v", c.tool, c.payload, gerr, werr)
					}
					continue
				}
				if !jsonEqual(got.Body, want.Body) {
					t.Errorf("%s %s: direct %s; go-sdk %s", c.tool, c.payload, got.Body, want.Body)
				}
			}
			_, ids := u.seen()
			var plain int
			for _, id := range ids {
				if strings.HasPrefix(id, `"ladder-`) {
					plain++
				}
			}
			if plain != len(calls) {
				t.Errorf("%d of the %d tools/call ids %q are the direct path's; want half", plain, len(ids), ids)
			}
		})
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflectEqual(x, y)
}

func reflectEqual(x, y any) bool {
	a, _ := json.Marshal(x)
	b, _ := json.Marshal(y)
	return bytes.Equal(a, b)
}

// A server may notify and ask the client things in the middle of a call, on
// the call's event stream: the notification is skipped, the ping answered
// (the server answers the call only then), and the call's answer read. The
// server is written out by hand, since go-sdk's sends its requests on
// another stream.
func TestDirectCallAnswersTheServersPing(t *testing.T) {
	pong := make(chan json.RawMessage, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Mcp-Session-Id", "s-1")
		switch {
		case m.Method == "initialize":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"hand","version":"1"}}}`, m.ID)
		case m.Method == "tools/call":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1}}\n\n")
			fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"ping\"}\n\n")
			w.(http.Flusher).Flush()
			select {
			case res := <-pong:
				fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\n", m.ID)
				fmt.Fprintf(w, "data: \"result\":{\"content\":[{\"type\":\"text\",\"text\":\"pong %s\"}]}}\n\n", res)
			case <-time.After(5 * time.Second):
			}
		case string(m.ID) == `"srv-1"` && m.Result != nil:
			pong <- m.Result
			w.WriteHeader(http.StatusAccepted)
		default: // notifications/initialized
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer srv.Close()
	p := upstream.NewPool(nil, nil)
	defer p.Close()
	res, err := execute(p, srv.URL, "chatty", `{}`)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if string(res.Body) != `{"text":"pong {}"}` {
		t.Fatalf("result %s, want the answer the server sent once its ping was answered", res.Body)
	}
}

// A server that forgets the session (a restart, an expiry) answers 404 for
// it: the call did not run there, so the pool opens a new session and sends
// it once more, and the agent never sees the restart.
func TestForgottenSessionIsReopened(t *testing.T) {
	u := newUpstream(t, upstreamOptions{stateful: true})
	p := upstream.NewPool(nil, nil)
	defer p.Close()
	call(t, p, u.URL)
	u.reset()
	call(t, p, u.URL)
	if got := u.runs.Load(); got != 2 {
		t.Fatalf("the tool ran %d times, want 2: once per call", got)
	}
	if _, ids := u.seen(); len(ids) != 3 {
		t.Fatalf("tools/call ids %q: want 3 (the second call sent again once on the new session)", ids)
	}
}

// The upstream tool's arguments are the payload's members with the scope
// set over them: a payload member named like a scope field (a value the
// agent chooses) never replaces the scope ladder checked, and the members'
// values go as they were sent. A payload that is not an object runs
// nothing.
func TestToolArgumentsScopeOverPayload(t *testing.T) {
	u := newUpstream(t, upstreamOptions{})
	p := upstream.NewPool(nil, nil)
	defer p.Close()
	if _, err := execute(p, u.URL, "text", `{"program":"p-chosen","bill_id":"B-9","nested":{"b":[1,2.50,{"z":null}],"a":"x<y"}}`); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	u.mu.Lock()
	bodies := slices.Clone(u.bodies)
	u.mu.Unlock()
	if len(bodies) != 1 {
		t.Fatalf("the upstream received %d calls, want 1", len(bodies))
	}
	var req struct {
		Params struct {
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(bodies[0]), &req); err != nil {
		t.Fatalf("the upstream's request %q: %v", bodies[0], err)
	}
	const want = `{"bill_id":"B-9","nested":{"b":[1,2.50,{"z":null}],"a":"x\u003cy"},"program":"p-1"}`
	if string(req.Params.Arguments) != want {
		t.Fatalf("arguments %s, want %s", req.Params.Arguments, want)
	}
	for _, bad := range []string{`null`, `[1]`, `"x"`} {
		if _, err := execute(p, u.URL, "text", bad); err == nil || !strings.Contains(err.Error(), "The payload is not a JSON object.") {
			t.Errorf("payload %s: error %v, want the payload is not a JSON object", bad, err)
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.bodies) != 1 {
		t.Errorf("the upstream received %d calls, want 1 (no payload that is not an object is sent)", len(u.bodies))
	}
}

// Numbers in the payload reach the upstream as they were sent: a float64
// would round a 17-digit id.
func TestPayloadNumbersKeepTheirDigits(t *testing.T) {
	u := newUpstream(t, upstreamOptions{})
	p := upstream.NewPool(nil, nil)
	defer p.Close()
	if _, err := execute(p, u.URL, "echo", `{"bill_id":"B-9","amount":12345678901234567}`); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.bodies) != 1 || !strings.Contains(u.bodies[0], `"amount":12345678901234567`) {
		t.Fatalf("the upstream received %q, want amount 12345678901234567", u.bodies)
	}
}

// An answer over 4 MiB fails the call instead of filling memory, whether it
// comes as JSON or as an event.
func TestOversizedAnswerFails(t *testing.T) {
	for _, opt := range []upstreamOptions{{}, {stateful: true}} {
		u := newUpstream(t, opt)
		p := upstream.NewPool(nil, nil)
		_, err := execute(p, u.URL, "huge", `{}`)
		p.Close()
		if le := ladder.AsError(err); err == nil || le.Code != ladder.CodeUpstreamFailed {
			t.Errorf("stateful %v: a 5 MiB answer: %v, want UPSTREAM_FAILED", opt.stateful, err)
		}
	}
}

// Observe hears of every call with its executor, capability and outcome.
func TestObserveNamesTheOutcome(t *testing.T) {
	u := newUpstream(t, upstreamOptions{})
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release // answers only once the test is over
	}))
	defer slow.Close()
	defer close(release)
	p := upstream.NewPool(nil, nil)
	defer p.Close()
	var got []string
	p.Observe = func(executor, capability, outcome string, d time.Duration) {
		got = append(got, executor+" "+capability+" "+outcome)
	}
	for _, c := range []struct {
		x   ladder.Executor
		cap string
	}{
		{ladder.Executor{Kind: ladder.ExecMCP, URL: u.URL, Tool: "echo"}, "l:echo"},
		{ladder.Executor{Kind: ladder.ExecMCP, URL: u.URL, Tool: "fail"}, "l:fail"},
		{ladder.Executor{Kind: ladder.ExecHTTP, URL: slow.URL, Timeout: 50 * time.Millisecond}, "s:post"},
		{ladder.Executor{Kind: ladder.ExecRecord}, "r:note"},
	} {
		p.Execute(context.Background(), c.x, upstream.Request{Capability: c.cap, Payload: json.RawMessage(`{"bill_id":"B-1"}`), Scope: map[string]string{"program": "p"}})
	}
	want := []string{"mcp l:echo ok", "mcp l:fail failed", "http s:post timeout", "record r:note ok"}
	if !slices.Equal(got, want) {
		t.Fatalf("observed %q, want %q", got, want)
	}
}

// An upstream that hangs while its session opens holds up only the calls to
// it: a call to another upstream completes meanwhile.
func TestHungUpstreamHoldsUpOnlyItself(t *testing.T) {
	healthy := newUpstream(t, upstreamOptions{})
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(arrived) })
		<-release
	}))
	defer hung.Close()
	p := upstream.NewPool(nil, nil)
	defer p.Close()
	defer close(release) // first, so the hung session's opening ends

	hungDone := make(chan error, 1)
	go func() {
		_, err := p.Execute(context.Background(), ladder.Executor{Kind: ladder.ExecMCP, URL: hung.URL, Tool: "echo", Timeout: time.Minute},
			upstream.Request{Capability: "h:echo", Payload: json.RawMessage(`{}`)})
		hungDone <- err
	}()
	<-arrived // the hung upstream's session is being opened now
	done := make(chan struct{})
	go func() {
		defer close(done)
		call(t, p, healthy.URL)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("a call to a healthy upstream waited for another upstream's session to open")
	}
	select {
	case err := <-hungDone:
		t.Fatalf("the call to the hung upstream returned before it was released: %v", err)
	default:
	}
}

// Opening a session is logged with the protocol and how calls will go, and
// without the password a URL may carry.
func TestSessionOpeningIsLogged(t *testing.T) {
	u := newUpstream(t, upstreamOptions{})
	var buf bytes.Buffer
	p := upstream.NewPool(nil, slog.New(slog.NewJSONHandler(&buf, nil)))
	defer p.Close()
	withPassword := strings.Replace(u.URL, "http://", "http://ops:s3cret-pw@", 1)
	call(t, p, withPassword)
	log := buf.String()
	for _, want := range []string{`"msg":"upstream MCP session opened"`, `"protocol":"2025-11-25"`, `"calls":"plain POST"`, `ops:xxxxx@`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
	if strings.Contains(log, "s3cret-pw") {
		t.Errorf("log shows the URL's password:\n%s", log)
	}
}

// The answer's parts a call uses: the structured content when there is
// some and no error (the content blocks then go unread, so content that is
// not MCP's does not fail the call), else the text blocks, which must be
// MCP content.
func TestAnswerPartsTheCallUses(t *testing.T) {
	tests := []struct {
		result   string
		body     string // the call's result, or "" for a failed call
		failWith string
	}{
		{`{"content":[{"type":"text","text":"{\"a\":1}"}],"structuredContent":{"a" : 1}}`, `{"a":1}`, ""},
		{`{"content":[{"type":7}],"structuredContent":{"a":1}}`, `{"a":1}`, ""},
		{`{"content":[{"type":"text","text":"line \"one\"\n"},{"type":"text","text":"two"}]}`, `{"text":"line \"one\"\n\ntwo"}`, ""},
		{`{"content":[{"type":"text","text":"no such program"}],"structuredContent":{"a":1},"isError":true}`, "", "answered with an error: no such program."},
		{`{"content":[{"type":7}],"isError":true}`, "", "failed."},
		{`{"content":{"type":"text"}}`, "", "failed."},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&m) != nil {
				http.Error(w, "a JSON-RPC POST", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			switch m.Method {
			case "initialize":
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"hand","version":"1"}}}`, m.ID)
			case "tools/call":
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, tt.result)
			default:
				w.WriteHeader(http.StatusAccepted)
			}
		}))
		p := upstream.NewPool(nil, nil)
		res, err := execute(p, srv.URL, "t", `{}`)
		p.Close()
		srv.Close()
		if tt.body != "" {
			if err != nil || string(res.Body) != tt.body {
				t.Errorf("result %s: got %s (%v), want %s", tt.result, res.Body, err, tt.body)
			}
			continue
		}
		if le := ladder.AsError(err); err == nil || le.Code != ladder.CodeUpstreamFailed || !strings.HasSuffix(le.Message, tt.failWith) {
			t.Errorf("result %s: got %s (%v), want UPSTREAM_FAILED ending %q", tt.result, res.Body, err, tt.failWith)
		}
	}
}

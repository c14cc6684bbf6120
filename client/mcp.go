package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder"
)

// MCP is a session with a ladder server's MCP endpoint (POST /mcp) as one
// agent key, on the go-sdk client. Its errors are *ladder.Error values: a
// JSON-RPC error becomes the refusal named by its data.code (or message),
// and an isError tool result becomes a refusal whose message is the tool's
// text (see IsToolError).
type MCP struct {
	server  string
	session *sdk.ClientSession
}

var _ ladder.StepReader = (*MCP)(nil)

// MCPOptions tune ConnectMCP. The zero value is usable.
type MCPOptions struct {
	// HTTPClient is the client whose transport carries the requests; its
	// transport is wrapped to add the bearer key. Nil means a client with
	// http.DefaultTransport and no overall timeout (use the context).
	HTTPClient *http.Client
	// Name and Version identify this client to the server (default
	// "ladder-client", "dev").
	Name, Version string
}

// ConnectMCP opens an MCP session with the server at baseURL (its /mcp
// endpoint; a URL that already ends in /mcp is used as it is) with key as
// the bearer token.
func ConnectMCP(ctx context.Context, baseURL, key string, opts *MCPOptions) (*MCP, error) {
	if opts == nil {
		opts = &MCPOptions{}
	}
	base := strings.TrimSuffix(baseURL, "/")
	endpoint := base
	if !strings.HasSuffix(endpoint, "/mcp") {
		endpoint += "/mcp"
	} else {
		base = strings.TrimSuffix(base, "/mcp")
	}
	hc := &http.Client{}
	if opts.HTTPClient != nil {
		c := *opts.HTTPClient
		hc = &c
	}
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	hc.Transport = bearerTransport{key: key, base: rt}
	name, ver := opts.Name, opts.Version
	if name == "" {
		name = "ladder-client"
	}
	if ver == "" {
		ver = "dev"
	}
	c := sdk.NewClient(&sdk.Implementation{Name: name, Version: ver}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		return nil, mcpError(ctx, base, err)
	}
	return &MCP{server: base, session: cs}, nil
}

// Close ends the session.
func (m *MCP) Close() error { return m.session.Close() }

// Server returns the server's base URL.
func (m *MCP) Server() string { return m.server }

// Session returns the underlying go-sdk session, for tools this package
// has no helper for.
func (m *MCP) Session() *sdk.ClientSession { return m.session }

// CallTool calls a tool with args (any JSON-encodable value; nil sends {})
// and decodes its structuredContent into out (unless out is nil). It
// returns the text content. A JSON-RPC error and an isError result are
// both returned as *ladder.Error.
func (m *MCP) CallTool(ctx context.Context, name string, args, out any) (string, error) {
	if args == nil {
		args = map[string]any{}
	}
	res, err := m.session.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", mcpError(ctx, m.server, err)
	}
	text := resultText(res)
	if res.IsError {
		return text, toolError(name, text)
	}
	if out != nil {
		if res.StructuredContent == nil {
			return text, &ladder.Error{Code: ladder.CodeUpstreamFailed, Message: fmt.Sprintf("The server %s answered %s without structuredContent.", m.server, name), Hint: "the server is older than this client; upgrade it"}
		}
		data, err := json.Marshal(res.StructuredContent)
		if err == nil {
			err = json.Unmarshal(data, out)
		}
		if err != nil {
			return text, &ladder.Error{Code: ladder.CodeUpstreamFailed, Message: fmt.Sprintf("Cannot read the structuredContent of %s from %s.", name, m.server), Hint: "the server and this client disagree on the output shape; upgrade one of them", Err: err}
		}
	}
	return text, nil
}

// Steps calls which_steps_run_alone (queue may be empty for every queue).
// The view's Sentence is the text content's first line.
func (m *MCP) Steps(ctx context.Context, queue string) (ladder.StepsView, error) {
	var v ladder.StepsView
	args := map[string]any{}
	if queue != "" {
		args["queue"] = queue
	}
	text, err := m.CallTool(ctx, "which_steps_run_alone", args, &v)
	if err != nil {
		return ladder.StepsView{}, err
	}
	v.Sentence, _, _ = strings.Cut(text, "\n")
	return v, nil
}

// Evidence calls step_evidence with {"step": step} (and queue, when not
// empty). An unknown step is a *ladder.Error with code STEP_NOT_FOUND whose
// message is the server's sentence (IsToolError reports true).
func (m *MCP) Evidence(ctx context.Context, queue, step string) (ladder.EvidencePack, error) {
	var p ladder.EvidencePack
	args := map[string]any{"step": step}
	if queue != "" {
		args["queue"] = queue
	}
	text, err := m.CallTool(ctx, "step_evidence", args, &p)
	if err != nil {
		return ladder.EvidencePack{}, err
	}
	p.Sentence = text
	return p, nil
}

// IsToolError reports whether err came from an isError tool result (the
// model-fixable kind: an unknown step, a bad argument) rather than from a
// protocol error or a failed connection.
func IsToolError(err error) bool {
	var e *ladder.Error
	if !errors.As(err, &e) {
		return false
	}
	v, _ := e.Data["tool_error"].(bool)
	return v
}

// toolError turns an isError result's text into a refusal. The text is
// "CODE: sentence. Hint: hint" on ladder servers.
func toolError(tool, text string) *ladder.Error {
	msg, hint, _ := strings.Cut(text, " Hint: ")
	code := ladder.CodeInvalidArgument
	if name, rest, ok := strings.Cut(msg, ": "); ok && name != "" && strings.ToUpper(name) == name && !strings.Contains(name, " ") {
		code, msg = ladder.Code(name), rest
	} else if !strings.HasPrefix(msg, "Invalid arguments") && (tool == "step_evidence" || tool == "route_item" || tool == "which_steps_run_alone") {
		code = ladder.CodeStepNotFound
	}
	return &ladder.Error{Code: code, Message: strings.TrimSpace(msg), Hint: strings.TrimSpace(hint), Data: map[string]any{"tool_error": true, "tool": tool}}
}

func resultText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// mcpError maps what the go-sdk client returns to a refusal.
func mcpError(ctx context.Context, server string, err error) error {
	if err == nil {
		return nil
	}
	var le *ladder.Error
	if errors.As(err, &le) {
		return le
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &ladder.Error{Code: ladder.CodeUpstreamTimeout, Message: fmt.Sprintf("The server %s did not answer in time.", server), Hint: "check that the server is up and not overloaded, or raise the timeout", Err: err}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return &ladder.Error{Code: ladder.CodeUpstreamTimeout, Message: fmt.Sprintf("The server %s did not answer in time.", server), Hint: "check that the server is up and not overloaded, or raise the timeout", Err: err}
		}
		return &ladder.Error{Code: ladder.CodeServerUnreachable, Message: fmt.Sprintf("Cannot connect to the ladder server at %s.", server), Hint: "check the server URL and that the server is running", Err: err}
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) && we.Code != rpcRejected {
		return wireError(server, we, err)
	}
	return &ladder.Error{Code: ladder.CodeServerUnreachable, Message: fmt.Sprintf("Cannot connect to the ladder server at %s.", server), Hint: "check the server URL and that the server is running", Err: err}
}

// rpcRejected is the go-sdk's "rejected by transport" code (-32005), which
// wraps transport failures rather than a server's answer.
const rpcRejected = -32005

// wireError reads a JSON-RPC error whose message and data.code are a
// refusal name (seed 004).
func wireError(server string, we *jsonrpc.Error, cause error) *ladder.Error {
	var data map[string]any
	_ = json.Unmarshal(we.Data, &data)
	str := func(k string) string { s, _ := data[k].(string); return s }
	code := ladder.Code(str("code"))
	if !knownCode(code) {
		code = ladder.Code(we.Message)
	}
	msg := str("message")
	if !knownCode(code) {
		// Not a ladder refusal: an SDK-level error such as an unknown tool.
		switch we.Code {
		case ladder.RPCAuthFailed:
			code = ladder.CodeKeyInvalid
		case ladder.RPCInvalidParams:
			code = ladder.CodeInvalidArgument
		default:
			code = ladder.CodeUpstreamFailed
		}
		if msg == "" {
			msg = we.Message
		}
	}
	if msg == "" {
		msg = fmt.Sprintf("%s refused the request: %s", server, code.Info().Meaning)
	}
	e := &ladder.Error{Code: code, Message: msg, Hint: str("hint"), Err: cause}
	for k, v := range data {
		if k == "code" || k == "message" || k == "hint" {
			continue
		}
		if e.Data == nil {
			e.Data = map[string]any{}
		}
		e.Data[k] = v
	}
	if e.Data == nil {
		e.Data = map[string]any{}
	}
	e.Data["jsonrpc_code"] = we.Code
	return e
}

func knownCode(c ladder.Code) bool {
	if c == "" {
		return false
	}
	for _, info := range ladder.Codes() {
		if info.Code == c {
			return true
		}
	}
	return false
}

// bearerTransport adds the bearer key to every request.
type bearerTransport struct {
	key  string
	base http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.key != "" {
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	return b.base.RoundTrip(r)
}

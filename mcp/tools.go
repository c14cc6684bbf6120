package mcp

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/mcpwire"
	"github.com/ladderhq/ladder/internal/strictjson"
)

//go:embed schemas/*.json
var schemaFiles embed.FS

// toolDef is one tool of the surface. Adding a tool is adding one entry to
// a table below: its definition and its call.
type toolDef struct {
	name        string
	title       string
	description string
	in, out     string // schema file names under schemas/, without .json
	// alias is another name calls may use (a capability's canonical id
	// when tools are listed by their portable names).
	alias string
	// inDoc, when set, is the whole input schema (capability tools
	// generate theirs from the config); in is then ignored.
	inDoc map[string]any
	// inSchema, when set, adjusts the loaded input schema for the
	// workspace (e.g. lists its gate case ids as an enum).
	inSchema    func(schema map[string]any)
	annotations sdk.ToolAnnotations
	// call runs the tool for an agent of one workspace. It returns the text
	// content, the structured content, or an error (a *ladder.Error becomes
	// an isError result when the model can fix it, a JSON-RPC error else;
	// structured content returned with it goes into the isError result).
	call func(ctx context.Context, p ladder.Principal, args json.RawMessage) (string, any, error)
}

func ptr[T any](v T) *T { return &v }

// readOnly, write and external are the annotation sets the tools use.
var (
	readOnly = sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}
	// recordOnly tools write to ladder's own log but change nothing
	// outside it, and a repeat returns the first answer.
	recordOnly = sdk.ToolAnnotations{ReadOnlyHint: false, IdempotentHint: true, DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}
)

// ladderTools are the tools of seed 000, in the fixed order of §3.1.
func (h *Handler) ladderTools() []toolDef {
	return []toolDef{
		{
			name: "which_steps_run_alone", title: "Which steps run alone",
			description: "Lists the steps of this workspace's queues with their lane (human_only, shadow, propose, auto), whether the agent may run each alone, why, and last-4-weeks accuracy. Call it first to learn step names and before acting. Read-only; records nothing.",
			in:          "which_steps_run_alone.in", out: "which_steps_run_alone.out", annotations: readOnly,
			call: h.whichStepsRunAlone,
		},
		{
			name: "step_evidence", title: "Step evidence",
			description: "Returns one step's evidence pack: lane, why, weekly accuracy with Wilson 95% bounds, rolling 2- and 4-week windows, operator error rate, every lane change with its rule and numbers, the outcome test, recent disagreements and audits. Step is an id or plain name; call which_steps_run_alone for names. Read-only.",
			in:          "step_evidence.in", out: "step_evidence.out", annotations: readOnly,
			call: h.stepEvidence,
		},
		{
			name: "route_item", title: "Route an item",
			description: "Decides one item at one step before you act: act_alone (do it), propose (send a proposal and wait for a person) or human_only (leave it to a person), plus whether the item is sampled for audit. Same answer as POST /v1/route. Side effect: the route is recorded in the audit log; repeating it for the same item returns the first route.",
			in:          "route_item.in", out: "route_item.out", annotations: recordOnly,
			call: h.routeItem,
		},
	}
}

// decodeArgs reads tool arguments strictly; a fault is an isError result
// naming the field.
func decodeArgs(args json.RawMessage, v any) error {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	// Every tools/call reaches a tool through the front door, which ran
	// strictjson.Check on the whole body, arguments included.
	if err := strictjson.UnmarshalChecked(args, v); err != nil {
		field := ""
		var se *strictjson.Error
		if ok := asStrict(err, &se); ok {
			field = se.Path
		}
		return &ladder.Error{Code: ladder.CodeInvalidArgument, Message: "Invalid arguments: " + err.Error() + ".", Hint: "fix the field and call again; the input schema lists every field", Data: map[string]any{"field": field}}
	}
	return nil
}

func asStrict(err error, target **strictjson.Error) bool {
	se, ok := err.(*strictjson.Error)
	if ok {
		*target = se
	}
	return ok
}

func (h *Handler) whichStepsRunAlone(ctx context.Context, p ladder.Principal, args json.RawMessage) (string, any, error) {
	var in struct {
		Queue string `json:"queue"`
	}
	if err := decodeArgs(args, &in); err != nil {
		return "", nil, err
	}
	v, err := h.svc.StepsRunAlone(ctx, p.Workspace, in.Queue, h.baseURL(ctx))
	if err != nil {
		return "", nil, err
	}
	var b strings.Builder
	b.WriteString(v.Sentence)
	for _, s := range v.Steps {
		fmt.Fprintf(&b, "\n- %s (%s/%s): %s. %s", s.Name, s.Queue, s.Step, s.Lane, s.Why)
	}
	return b.String(), v, nil
}

func (h *Handler) stepEvidence(ctx context.Context, p ladder.Principal, args json.RawMessage) (string, any, error) {
	var in struct {
		Step  string `json:"step"`
		Queue string `json:"queue"`
	}
	if err := decodeArgs(args, &in); err != nil {
		return "", nil, err
	}
	pack, err := h.svc.Evidence(ctx, p.Workspace, in.Queue, in.Step)
	if err != nil {
		return "", nil, err
	}
	return pack.Sentence, pack, nil
}

func (h *Handler) routeItem(ctx context.Context, p ladder.Principal, args json.RawMessage) (string, any, error) {
	var in ladder.RouteRequest
	// The one scan of decodeFlat for the usual arguments (strings and
	// features kept raw); decodeArgs decides and words everything else.
	if !decodeFlat(args, routeRequestFields(&in)) {
		if err := decodeArgs(args, &in); err != nil {
			return "", nil, err
		}
	}
	rt, err := h.svc.Route(ctx, p, in)
	if err != nil {
		return "", nil, err
	}
	return rt.Reason + " Decision: " + string(rt.Decision) + "; route_id " + rt.ID + ".", rt, nil
}

func (h *Handler) baseURL(ctx context.Context) string {
	if c, ok := callFrom(ctx); ok {
		return c.baseURL
	}
	return h.opts.BaseURL
}

// modelFixable are the refusals a model can fix by changing its arguments:
// they come back as isError results, not protocol errors.
var modelFixable = map[ladder.Code]bool{
	ladder.CodeInvalidArgument:  true,
	ladder.CodeStepNotFound:     true,
	ladder.CodeEvidenceInvalid:  true,
	ladder.CodeUnknownCase:      true,
	ladder.CodeUnknownFunction:  true,
	ladder.CodeBypassToHuman:    true,
	ladder.CodeRouteNotFound:    true,
	ladder.CodeApprovalNotFound: true,
	ladder.CodeNotFound:         true,
	// The model can send a new key or the first payload.
	ladder.CodeIdempotencyKeyUsed: true,
}

// schemaDoc is an embedded schema, with the shared definitions it refers
// to, as the JSON tools/list sends (the bytes encoding/json writes for
// loadSchema's map). Every workspace's server lists the same document, so
// the process decodes each schema once and shares it: a map per tool per
// workspace was most of a workspace server's heap, 125 KB a workspace for
// as long as the server lived (BenchmarkMCPWorkspaceHeap).
func schemaDoc(name string) json.RawMessage {
	doc, ok := schemaDocs()[name]
	if !ok {
		panic(fmt.Sprintf("mcp: no schema %s", name)) // a build mistake, caught by every test
	}
	return doc
}

// schemaDocs is every embedded schema's document by name, built on first
// use. The documents are read-only: AddTool and tools/list only read them.
var schemaDocs = sync.OnceValue(func() map[string]json.RawMessage {
	files, err := fs.Glob(schemaFiles, "schemas/*.json")
	if err != nil {
		panic(fmt.Sprintf("mcp: schemas: %v", err))
	}
	docs := make(map[string]json.RawMessage, len(files))
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".json")
		docs[name] = schemaJSON(name, loadSchema(name))
	}
	return docs
})

// schemaJSON is a schema built as a map, as the JSON tools/list sends: the
// bytes the SDK writes for the map (sorted keys, no HTML escaping), a
// fraction of the map's heap for as long as the tool is listed. The copy
// is the document's exact size, without the encoder buffer's spare room.
func schemaJSON(name string, schema map[string]any) json.RawMessage {
	doc, err := mcpwire.Encode(schema)
	if err != nil {
		panic(fmt.Sprintf("mcp: schema of %s: %v", name, err)) // only JSON values go into a schema
	}
	return bytes.Clone(doc)
}

// loadSchema reads an embedded schema and adds the shared definitions it
// refers to, as a map of the caller's own to change.
func loadSchema(name string) map[string]any {
	data, err := schemaFiles.ReadFile("schemas/" + name + ".json")
	if err != nil {
		panic(fmt.Sprintf("mcp: schema %s: %v", name, err)) // a build mistake, caught by every test
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		panic(fmt.Sprintf("mcp: schema %s: %v", name, err))
	}
	if strings.Contains(string(data), "#/$defs/") {
		defs := map[string]any{}
		for _, d := range []string{"window", "review"} {
			if strings.Contains(string(data), "#/$defs/"+d) {
				defs[d] = loadSchema(d)
			}
		}
		m["$defs"] = defs
	}
	return m
}

// buildServer makes the SDK server of one workspace; ctx is the request's
// (or startup's) context, for reading the lanes descriptions mention.
func (h *Handler) buildServer(ctx context.Context, workspace string) *workspaceServer {
	tools := slices.Concat(h.ladderTools(), h.gateTools(workspace), h.capabilityTools(ctx, workspace))
	srv := sdk.NewServer(h.impl, &sdk.ServerOptions{
		// One page holds every tool, so tools/list never issues a cursor
		// and the front door refuses any cursor sent (checkListCursor).
		PageSize:     max(sdk.DefaultPageSize, len(tools)),
		Instructions: "ladder decides whether you may act alone on a business step. Call which_steps_run_alone first and route_item before acting on an item; act only when the decision is act_alone. Before an irreversible commit, call list_precondition_functions, then authorize, and act only on gate_state PASS. Capability tools run a call only when it is allowed; otherwise they return an approval_id to follow with approval_status.",
		// Stateless, the SDK connects and closes a session per request and
		// logs three Info lines for it; keep its warnings and errors only
		// (BENCHMARKS.md, "MCP: governed route_item vs a bare go-sdk server").
		Logger: slog.New(minLevel{h.log.Handler(), slog.LevelWarn}),
		// The tool list depends on the key's workspace (and capability
		// descriptions on live lanes), so no shared cache may keep it.
		SetCacheable: func(ctx context.Context, req sdk.Request, c *sdk.Cacheable) {
			c.TTLMs, c.CacheScope = 0, "private"
		},
	})
	ws := &workspaceServer{server: srv, names: map[string]string{}, calls: map[string]toolRun{}, lanes: h.laneSignature(ctx, workspace)}
	for _, t := range tools {
		h.addTool(ws, t)
	}
	return ws
}

// addTool registers a tool with the SDK, wrapping its call with argument
// decoding and the error contract.
func (h *Handler) addTool(ws *workspaceServer, t toolDef) {
	name := t.name
	ann := t.annotations
	ann.Title = t.title
	// Only a schema built or adjusted for the workspace is the
	// workspace's own.
	var in json.RawMessage
	switch {
	case t.inDoc != nil:
		in = schemaJSON(name, t.inDoc)
	case t.inSchema != nil:
		m := loadSchema(t.in)
		t.inSchema(m)
		in = schemaJSON(name, m)
	default:
		in = schemaDoc(t.in)
	}
	def := &sdk.Tool{Name: name, Title: t.title, Description: t.description, InputSchema: in, OutputSchema: schemaDoc(t.out), Annotations: &ann}
	run := h.runner(name, t.call)
	ws.server.AddTool(def, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		// The SDK hands tools the request's context, where the front door
		// put the caller.
		p, ok := principalFrom(ctx)
		if !ok {
			return nil, toRPCError(&ladder.Error{Code: ladder.CodeKeyMissing, Hint: "send an agent key"})
		}
		return run(withCallWait(ctx, req.Params.Meta), p, req.Params.Arguments)
	})
	ws.calls[name] = run
	ws.names[name] = name
	if alt := portable(name); alt != name {
		ws.names[alt] = name
	}
	if t.alias != "" {
		ws.names[t.alias] = name
	}
}

// toolRun runs one tool for a caller: a result, or the JSON-RPC error the
// SDK sends. The SDK's handler and the tools/call fast path both call it,
// so both answer alike.
type toolRun func(ctx context.Context, p ladder.Principal, args json.RawMessage) (*sdk.CallToolResult, error)

// runner wraps a tool's call with the error contract: refusals a model can
// fix become isError results, the others JSON-RPC errors.
func (h *Handler) runner(name string, call func(ctx context.Context, p ladder.Principal, args json.RawMessage) (string, any, error)) toolRun {
	return func(ctx context.Context, p ladder.Principal, args json.RawMessage) (*sdk.CallToolResult, error) {
		text, structured, err := call(ctx, p, args)
		if err != nil {
			e := ladder.AsError(err).Render(ladder.SurfaceMCP)
			h.countRefusal(ctx, e.Code)
			if e.Code == ladder.CodeInternal {
				h.log.ErrorContext(ctx, "tool failed", "tool", name, "err", err)
			}
			if modelFixable[e.Code] {
				msg := string(e.Code) + ": " + strings.TrimSpace(e.Message)
				if !strings.HasSuffix(msg, ".") {
					msg += "."
				}
				if e.Hint != "" {
					msg += " Hint: " + e.Hint
				}
				// A refusal that is a recorded verdict carries it, as REST's data does.
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}, StructuredContent: structured}, nil
			}
			return nil, toRPCError(e)
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: structured}, nil
	}
}

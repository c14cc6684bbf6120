package gateway

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"log/slog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder"
)

// ToolName is the gateway's one tool.
const ToolName = "ask_autonomy_ladder"

// ToolTitle and ToolDescription describe the tool to a model.
const (
	ToolTitle       = "Ask the autonomy ladder"
	ToolDescription = "Answers whether the agent may do one business step alone, across every ladder workspace this gateway holds a key for: the step's lane (human_only, shadow, propose, auto), why, and its last-4-weeks accuracy. Step is an id or plain name; stand-in names go through the alias table. Unknown or ambiguous names return isError with the nearest or matching names. Read-only."
)

//go:embed schema_in.json
var inputSchemaJSON []byte

//go:embed schema_out.json
var outputSchemaJSON []byte

// InputSchema and OutputSchema return the tool's JSON schemas.
func InputSchema() map[string]any  { return mustSchema(inputSchemaJSON) }
func OutputSchema() map[string]any { return mustSchema(outputSchemaJSON) }

func mustSchema(data []byte) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		panic(fmt.Sprintf("gateway: schema: %v", err)) // a build mistake, caught by every test
	}
	return m
}

func ptr[T any](v T) *T { return &v }

// Tool returns the tool's definition.
func Tool() *sdk.Tool {
	return &sdk.Tool{
		Name:         ToolName,
		Title:        ToolTitle,
		Description:  ToolDescription,
		InputSchema:  InputSchema(),
		OutputSchema: OutputSchema(),
		// It only reads; the servers it asks are the ones named in the
		// gateway file, not an open world.
		Annotations: &sdk.ToolAnnotations{Title: ToolTitle, ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}
}

// NewServer returns an MCP server with the one tool ask_autonomy_ladder,
// answered by g. Serve it with server.Run(ctx, &sdk.StdioTransport{}).
func NewServer(g *Gateway, version string, log *slog.Logger) *sdk.Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "ladder-gateway", Title: "ladder gateway — ask the autonomy ladder across workspaces", Version: version}, &sdk.ServerOptions{
		Instructions: "Call ask_autonomy_ladder with a step name before acting on a business step; act alone only when the lane is auto.",
		Logger:       log,
	})
	srv.AddTool(Tool(), func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var in struct {
			Step string `json:"step"`
		}
		args := req.Params.Arguments
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage("{}")
		}
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return toolError(fmt.Sprintf("Invalid arguments: %v. Send {\"step\": \"<step id or plain name>\"}.", err)), nil
		}
		ans, err := g.Ask(ctx, in.Step)
		if err != nil {
			e := ladder.AsError(err)
			return toolError(fmt.Sprintf("%s. Hint: %s", e.Message, e.Hint)), nil
		}
		return &sdk.CallToolResult{
			IsError:           ans.Status != StatusFound,
			Content:           []sdk.Content{&sdk.TextContent{Text: ans.Answer}},
			StructuredContent: ans,
		}, nil
	})
	return srv
}

func toolError(text string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}}}
}

// Package client talks to a ladder server over REST (and, for the Gateway,
// over MCP with the go-sdk client). Its errors are *ladder.Error values
// carrying the server's refusal names, so a caller branches on the same
// codes the API documents.
//
// It depends on the root package alone for the contract: Client takes and
// returns the root's request, answer and view types and implements its
// service interfaces (ladder.LadderService, ApprovalService, GateService,
// CapabilityService) bound to its key, as service.Caller does in process;
// MCP implements ladder.StepReader. It never imports the service, the
// gate's CEL engine or a store (the root's TestLayering fails if it does).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ladderhq/ladder"
)

// Client is a REST client for one server and one key.
type Client struct {
	BaseURL string
	Key     string
	HTTP    *http.Client
	// Surface is the surface whose terms the server's refusals should use
	// (the CLI sets ladder.SurfaceCLI, so hints name commands and flags);
	// the zero value is REST's.
	Surface ladder.Surface
}

// sign sets what every request carries: the key and the surface.
func (c *Client) sign(req *http.Request) {
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	if c.Surface != ladder.SurfaceREST {
		req.Header.Set(ladder.SurfaceHeader, c.Surface.String())
	}
}

var (
	_ ladder.LadderService     = (*Client)(nil)
	_ ladder.ApprovalService   = (*Client)(nil)
	_ ladder.GateService       = (*Client)(nil)
	_ ladder.CapabilityService = (*Client)(nil)
)

// New returns a client with a 30-second timeout.
func New(baseURL, key string) *Client {
	return &Client{BaseURL: strings.TrimSuffix(baseURL, "/"), Key: key, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// do sends a request and decodes a 2xx answer into out, or returns the
// server's refusal as *ladder.Error.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	c.sign(req)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return c.unreachable(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return refusal(resp.StatusCode, path, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode answer of %s: %w", path, err)
	}
	return nil
}

// Steps lists which steps run alone (GET /v1/steps).
func (c *Client) Steps(ctx context.Context, queue string) (ladder.StepsView, error) {
	var v ladder.StepsView
	path := "/v1/steps"
	if queue != "" {
		path += "?queue=" + url.QueryEscape(queue)
	}
	return v, c.do(ctx, http.MethodGet, path, nil, &v)
}

// Evidence returns a step's evidence pack. queue may be empty when the step
// id or name is unique in the workspace.
func (c *Client) Evidence(ctx context.Context, queue, step string) (ladder.EvidencePack, error) {
	var p ladder.EvidencePack
	if queue == "" {
		queue = "-"
	}
	return p, c.do(ctx, http.MethodGet, "/v1/steps/"+url.PathEscape(queue)+"/"+url.PathEscape(step)+"/evidence", nil, &p)
}

// Route asks for a decision (POST /v1/route).
func (c *Client) Route(ctx context.Context, req ladder.RouteRequest) (ladder.Route, error) {
	var r ladder.Route
	return r, c.do(ctx, http.MethodPost, "/v1/route", req, &r)
}

// Review records a person's verdict on a route.
func (c *Client) Review(ctx context.Context, routeID string, req ladder.ReviewRequest) (ladder.ReviewResult, error) {
	var r ladder.ReviewResult
	return r, c.do(ctx, http.MethodPost, "/v1/routes/"+url.PathEscape(routeID)+"/review", req, &r)
}

// Outcome records an item's downstream outcome.
func (c *Client) Outcome(ctx context.Context, req ladder.OutcomeRequest) (ladder.Outcome, error) {
	var o ladder.Outcome
	return o, c.do(ctx, http.MethodPost, "/v1/outcomes", req, &o)
}

// Pin pins (or, with pin false, unpins) a step.
func (c *Client) Pin(ctx context.Context, queue, step string, req ladder.PinRequest, pin bool) (ladder.StepState, error) {
	var st ladder.StepState
	verb := "pin"
	if !pin {
		verb = "unpin"
	}
	if queue == "" {
		queue = "-"
	}
	return st, c.do(ctx, http.MethodPost, "/v1/steps/"+url.PathEscape(queue)+"/"+url.PathEscape(step)+"/"+verb, req, &st)
}

// refusal is the server's error answer (status, body) to path as
// *ladder.Error: its refusal when the body holds one.
// unreachable is the refusal for a server that did not answer:
// SERVER_UNREACHABLE, a client-side error naming the URL (UPSTREAM_FAILED
// is a capability's upstream failing behind a server that did answer).
func (c *Client) unreachable(err error) error {
	return &ladder.Error{Code: ladder.CodeServerUnreachable, Message: fmt.Sprintf("Cannot connect to the ladder server at %s.", c.BaseURL), Hint: "check the server URL (--server or LADDER_SERVER for the CLI) and that the server is running", Err: err}
}

func refusal(status int, path string, data []byte) error {
	var eb struct {
		Error ladder.Error `json:"error"`
	}
	if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
		return &eb.Error
	}
	return &ladder.Error{Code: ladder.CodeInternal, Message: fmt.Sprintf("HTTP %d from %s.", status, path), Hint: strings.TrimSpace(string(data))}
}

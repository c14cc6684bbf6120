// Package client talks to a ladder server over REST (and, for the Gateway,
// over MCP with the go-sdk client). Its errors are *ladder.Error values
// carrying the server's refusal names, so a caller branches on the same
// codes the API documents.
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
	"github.com/ladderhq/ladder/service"
)

// Client is a REST client for one server and one key.
type Client struct {
	BaseURL string
	Key     string
	HTTP    *http.Client
}

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
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return &ladder.Error{Code: ladder.CodeUpstreamFailed, Message: fmt.Sprintf("Cannot reach %s.", c.BaseURL), Hint: "check --server (or LADDER_SERVER) and that the server is running", Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var eb struct {
			Error ladder.Error `json:"error"`
		}
		if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
			return &eb.Error
		}
		return &ladder.Error{Code: ladder.CodeInternal, Message: fmt.Sprintf("HTTP %d from %s.", resp.StatusCode, path), Hint: strings.TrimSpace(string(data))}
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
func (c *Client) Steps(ctx context.Context, queue string) (service.StepsView, error) {
	var v service.StepsView
	path := "/v1/steps"
	if queue != "" {
		path += "?queue=" + url.QueryEscape(queue)
	}
	return v, c.do(ctx, http.MethodGet, path, nil, &v)
}

// Evidence returns a step's evidence pack. queue may be empty when the step
// id or name is unique in the workspace.
func (c *Client) Evidence(ctx context.Context, queue, step string) (service.EvidencePack, error) {
	var p service.EvidencePack
	if queue == "" {
		queue = "-"
	}
	return p, c.do(ctx, http.MethodGet, "/v1/steps/"+url.PathEscape(queue)+"/"+url.PathEscape(step)+"/evidence", nil, &p)
}

// Route asks for a decision (POST /v1/route).
func (c *Client) Route(ctx context.Context, req service.RouteRequest) (ladder.Route, error) {
	var r ladder.Route
	return r, c.do(ctx, http.MethodPost, "/v1/route", req, &r)
}

// Review records a person's verdict on a route.
func (c *Client) Review(ctx context.Context, routeID string, req service.ReviewRequest) (service.ReviewResult, error) {
	var r service.ReviewResult
	return r, c.do(ctx, http.MethodPost, "/v1/routes/"+url.PathEscape(routeID)+"/review", req, &r)
}

// Outcome records an item's downstream outcome.
func (c *Client) Outcome(ctx context.Context, req service.OutcomeRequest) (ladder.Outcome, error) {
	var o ladder.Outcome
	return o, c.do(ctx, http.MethodPost, "/v1/outcomes", req, &o)
}

// Pin pins (or, with pin false, unpins) a step.
func (c *Client) Pin(ctx context.Context, queue, step string, req service.PinRequest, pin bool) (ladder.StepState, error) {
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

package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ladderhq/ladder"
)

// GateFunctions lists the gate cases of the key's workspace and their
// precondition functions (GET /v1/gate/functions); caseID "" lists every
// case.
func (c *Client) GateFunctions(ctx context.Context, caseID string) (ladder.GateFunctionsView, error) {
	var v ladder.GateFunctionsView
	path := "/v1/gate/functions"
	if caseID != "" {
		path += "?case=" + url.QueryEscape(caseID)
	}
	return v, c.do(ctx, http.MethodGet, path, nil, &v)
}

// Authorize asks the evidence gate for a decision (POST /v1/gate/authorize).
// A decision, PASS or not, is a result; only GateState PASS authorizes.
func (c *Client) Authorize(ctx context.Context, req ladder.AuthorizeRequest) (ladder.GateResult, error) {
	var r ladder.GateResult
	return r, c.do(ctx, http.MethodPost, "/v1/gate/authorize", req, &r)
}

// GateHistory reads one page of recorded gate decisions, newest first
// (GET /v1/gate/history).
func (c *Client) GateHistory(ctx context.Context, req ladder.GateHistoryRequest) (ladder.GateHistoryPage, error) {
	q := url.Values{}
	for name, v := range map[string]string{"case": req.Case, "precondition_fn": req.PreconditionFn, "action_id": req.ActionID,
		"gate_state": req.GateState, "since": req.Since, "until": req.Until, "cursor": req.Cursor} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if req.Limit != 0 {
		q.Set("limit", strconv.Itoa(req.Limit))
	}
	path := "/v1/gate/history"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var p ladder.GateHistoryPage
	return p, c.do(ctx, http.MethodGet, path, nil, &p)
}

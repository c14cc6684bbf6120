package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ladderhq/ladder"
)

// AuditCheckpoint returns the latest signed checkpoint of the key's
// workspace's audit log (GET /v1/audit/checkpoint). Check its note with the
// server's checkpoint public key; the server's word alone proves nothing.
func (c *Client) AuditCheckpoint(ctx context.Context) (ladder.AuditCheckpoint, error) {
	var cp ladder.AuditCheckpoint
	return cp, c.do(ctx, http.MethodGet, "/v1/audit/checkpoint", nil, &cp)
}

// AuditProof returns record seq with its inclusion proof in the latest
// checkpoint (GET /v1/audit/records/{seq}/proof).
func (c *Client) AuditProof(ctx context.Context, seq int64) (ladder.AuditProof, error) {
	var p ladder.AuditProof
	return p, c.do(ctx, http.MethodGet, "/v1/audit/records/"+strconv.FormatInt(seq, 10)+"/proof", nil, &p)
}

// AuditConsistency returns the proof that the log at size to extends the
// log at size from (GET /v1/audit/consistency).
func (c *Client) AuditConsistency(ctx context.Context, from, to int64) (ladder.AuditConsistency, error) {
	q := url.Values{"from": {strconv.FormatInt(from, 10)}, "to": {strconv.FormatInt(to, 10)}}
	var p ladder.AuditConsistency
	if err := c.do(ctx, http.MethodGet, "/v1/audit/consistency?"+q.Encode(), nil, &p); err != nil {
		return p, fmt.Errorf("consistency %d→%d: %w", from, to, err)
	}
	return p, nil
}

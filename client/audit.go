package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ladderhq/ladder"
)

// auditValues is req's filters as query parameters.
func auditValues(req ladder.AuditListRequest) url.Values {
	q := url.Values{}
	for name, v := range map[string]string{"kind": req.Kind, "actor": req.Actor, "step": req.Step, "since": req.Since, "until": req.Until, "cursor": req.Cursor} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if req.Limit != 0 {
		q.Set("limit", strconv.Itoa(req.Limit))
	}
	return q
}

// AuditList reads one page of the key's workspace's audit trail, newest
// first (GET /v1/audit). Pass the page's NextCursor as req.Cursor for the
// next page.
func (c *Client) AuditList(ctx context.Context, req ladder.AuditListRequest) (ladder.AuditPage, error) {
	path := "/v1/audit"
	if q := auditValues(req); len(q) > 0 {
		path += "?" + q.Encode()
	}
	var p ladder.AuditPage
	return p, c.do(ctx, http.MethodGet, path, nil, &p)
}

// AuditVerify asks the server how far the audit log's hash chain verifies
// (GET /v1/audit/verify). A broken chain is a result with Intact false,
// not an error.
func (c *Client) AuditVerify(ctx context.Context) (ladder.AuditVerifyResult, error) {
	var r ladder.AuditVerifyResult
	return r, c.do(ctx, http.MethodGet, "/v1/audit/verify", nil, &r)
}

// AuditExport streams the key's workspace's records matching req, oldest
// first, in format (ladder.AuditFormatJSONL or AuditFormatCSV) to w as the
// server sends them (GET /v1/audit/export), and returns the bytes written.
// req's Cursor and Limit must be empty. The client's timeout does not cut
// an export short; ctx does.
func (c *Client) AuditExport(ctx context.Context, req ladder.AuditListRequest, format string, w io.Writer) (int64, error) {
	q := auditValues(req)
	if format != "" {
		q.Set("format", format)
	}
	path := "/v1/audit/export"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	if err != nil {
		return 0, fmt.Errorf("build request: %w", err)
	}
	c.sign(hreq)
	// An export may run longer than the timeout meant for one answer.
	hc := *c.HTTP
	hc.Timeout = 0
	resp, err := hc.Do(hreq)
	if err != nil {
		return 0, c.unreachable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return 0, refusal(resp.StatusCode, path, data)
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("audit export cut off after %d bytes: %w", n, err)
	}
	return n, nil
}

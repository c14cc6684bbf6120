package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/ladderhq/ladder"
)

// Import sends an import file of past records (POST /v1/import, an admin
// key): data in format (jsonl or csv), into workspace (needed for an
// all-workspaces admin key; "" for the key's own). Bad rows come back as a
// *ladder.Error whose Data["rows"] lists them by line.
func (c *Client) Import(ctx context.Context, workspace, format string, data []byte) (ladder.ImportResult, error) {
	q := url.Values{"format": {format}}
	if workspace != "" {
		q.Set("workspace", workspace)
	}
	path := "/v1/import?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, "POST", c.BaseURL+path, bytes.NewReader(data))
	if err != nil {
		return ladder.ImportResult{}, fmt.Errorf("build request: %w", err)
	}
	c.sign(req)
	ct := "application/x-ndjson"
	if format == ladder.ImportFormatCSV {
		ct = "text/csv"
	}
	req.Header.Set("Content-Type", ct)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return ladder.ImportResult{}, c.unreachable(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return ladder.ImportResult{}, fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return ladder.ImportResult{}, refusal(resp.StatusCode, path, body)
	}
	var res ladder.ImportResult
	if err := json.Unmarshal(body, &res); err != nil {
		return ladder.ImportResult{}, fmt.Errorf("decode answer of %s: %w", path, err)
	}
	return res, nil
}

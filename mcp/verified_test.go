package mcp_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ladderhq/ladder"
)

// TestVerifiedKeyOnlyForItsToken: the MCP handler takes a principal the
// front door noted only for the very token it verified; a request whose
// token differs (a forged or stale note) is authenticated afresh and a bad
// key refused, and a noted principal of a human key is still refused the
// agent surface.
func TestVerifiedKeyOnlyForItsToken(t *testing.T) {
	e, fast, _ := handlers(t)
	agentTok := e.Keys["vantrow-bills/agent"]
	agent, err := e.Svc.Authenticate(context.Background(), agentTok)
	if err != nil {
		t.Fatal(err)
	}
	human, err := e.Svc.Authenticate(context.Background(), e.Keys["vantrow-bills/human"])
	if err != nil {
		t.Fatal(err)
	}
	_, bogus, _ := ladder.NewKeyToken()
	// A key the front door took from its view of verified keys (hinted)
	// and revoked since, as by another replica or process: the commit of
	// the route refuses it, and nothing is recorded.
	k, goneTok, err := e.Svc.CreateKey(context.Background(), "cli", ladder.KeyRequest{Workspace: "vantrow-bills", Kind: ladder.KeyAgent, Name: "revoked while hinted"})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := e.Svc.Authenticate(context.Background(), goneTok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Svc.RevokeKey(context.Background(), "cli", "*", k.ID); err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"route_item","arguments":{"step":"post_tms","item":"VK-1"}}}`
	tests := []struct {
		name      string
		send      string // the request's bearer token
		noted     string // the token noted as verified ("" for none)
		as        ladder.Principal
		hinted    bool
		wantError string // "" for a route
	}{
		{"noted for this token", agentTok, agentTok, agent, false, ""},
		{"noted as hinted for this token", agentTok, agentTok, agent, true, ""},
		{"nothing noted", agentTok, "", ladder.Principal{}, false, ""},
		{"noted for another token", bogus, agentTok, agent, false, "KEY_INVALID"},
		{"noted principal of a human key", agentTok, agentTok, human, false, "HUMAN_KEY_REFUSED"},
		{"noted as hinted, revoked since", goneTok, goneTok, gone, true, "KEY_INVALID"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://ladder.test/mcp", strings.NewReader(strings.Replace(body, "VK-1", "VK-"+string(rune('a'+i)), 1)))
			r.Header.Set("Authorization", "Bearer "+tt.send)
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "application/json, text/event-stream")
			if tt.noted != "" {
				r = r.WithContext(ladder.WithVerifiedKey(r.Context(), tt.noted, tt.as, tt.hinted))
			}
			w := httptest.NewRecorder()
			fast.ServeHTTP(w, r)
			got := w.Body.String()
			if tt.wantError == "" {
				if w.Code != 200 || !strings.Contains(got, `"route_id`) {
					t.Errorf("HTTP %d %s; want a route", w.Code, got)
				}
				return
			}
			if !strings.Contains(got, tt.wantError) || strings.Contains(got, `"route_id`) {
				t.Errorf("HTTP %d %s; want %s", w.Code, got, tt.wantError)
			}
			if tt.hinted && w.Code != 401 {
				t.Errorf("HTTP %d; a key refused at its commit is refused as at the door, 401", w.Code)
			}
		})
	}
	recs, err := e.Store.ListAudit(context.Background(), ladder.AuditQuery{Actor: k.ID, Kind: ladder.AuditRoute})
	if err != nil || len(recs) != 0 {
		t.Errorf("routes recorded in the name of the revoked key: %d (%v)", len(recs), err)
	}
}

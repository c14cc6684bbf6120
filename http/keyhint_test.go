package http_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
)

// keyReads counts the store's reads of keys.
type keyReads struct {
	ladder.Store
	n *atomic.Int64
}

func (s keyReads) GetKey(ctx context.Context, id string) (ladder.Key, error) {
	s.n.Add(1)
	return s.Store.GetKey(ctx, id)
}

// TestRouteKeyFromView: POST /v1/route takes a key this server verified
// before from its view of verified keys instead of reading it again, and
// a key revoked in the store behind the view's back (as by another process
// or replica) is refused on every path all the same: a new route (refused
// at its commit, nothing recorded), a replay of a routed item, an unknown
// step and a malformed body (none of which commits, so the key is read
// before the answer), and the REST endpoints that never take the view.
func TestRouteKeyFromView(t *testing.T) {
	var reads atomic.Int64
	e := testenv.StartWith(t, "", testenv.Options{WrapStore: func(s ladder.Store) ladder.Store { return keyReads{s, &reads} }})
	ctx := context.Background()
	k, tok, err := e.Svc.CreateKey(ctx, "cli", ladder.KeyRequest{Workspace: "vantrow-bills", Kind: ladder.KeyAgent, Name: "revoked behind the view"})
	if err != nil {
		t.Fatal(err)
	}
	route := func(item string) testenv.Response {
		return e.Do("POST", "/v1/route", tok, map[string]any{"step": "post_tms", "item": item})
	}
	if r := route("KV-1"); r.Status != http.StatusOK {
		t.Fatalf("first route: HTTP %d %s", r.Status, r.Raw)
	}
	before := reads.Load()
	first := route("KV-2")
	if first.Status != http.StatusOK {
		t.Fatalf("second route: HTTP %d %s", first.Status, first.Raw)
	}
	if n := reads.Load() - before; n != 0 {
		t.Errorf("a route with a key verified before read it %d times; want 0 (the view, checked at the commit)", n)
	}
	if again := route("KV-2"); again.Status != http.StatusOK || again.Body["route_id"] != first.Body["route_id"] {
		t.Errorf("replay: HTTP %d %s; want route %v again", again.Status, again.Raw, first.Body["route_id"])
	}
	// A refusal commits nothing, so it confirms the key from the store
	// before it answers.
	before = reads.Load()
	if r := e.Do("POST", "/v1/route", tok, map[string]any{"step": "no_such_step", "item": "KV-3"}); r.Status == http.StatusOK || r.ErrorCode() == "KEY_INVALID" {
		t.Errorf("an unknown step: HTTP %d %s; want its own refusal", r.Status, r.Raw)
	}
	if n := reads.Load() - before; n != 1 {
		t.Errorf("a refused route read the key %d times; want 1 (nothing committed under its check)", n)
	}

	entry, err := ladder.NewAuditEntry(k.Workspace, "cli", ladder.AuditKeyRevoke, k.ID, e.Clock.Now(), map[string]any{"key_id": k.ID})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Store.RevokeKey(ctx, k.ID, e.Clock.Now(), entry); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, method, path string
		body               any
	}{
		{"a new route", "POST", "/v1/route", map[string]any{"step": "post_tms", "item": "KV-AFTER"}},
		{"a replay of a routed item", "POST", "/v1/route", map[string]any{"step": "post_tms", "item": "KV-2"}},
		{"an unknown step", "POST", "/v1/route", map[string]any{"step": "no_such_step", "item": "KV-AFTER-2"}},
		{"a malformed body", "POST", "/v1/route", map[string]any{"step": 7}},
		{"an outcome", "POST", "/v1/outcomes", map[string]any{"step": "post_tms", "item": "KV-1", "outcome": "success"}},
		{"the steps", "GET", "/v1/steps", nil},
	} {
		r := e.Do(tt.method, tt.path, tok, tt.body)
		if r.Status != http.StatusUnauthorized || r.ErrorCode() != "KEY_INVALID" {
			t.Errorf("%s with the key revoked behind the view: HTTP %d %s; want 401 KEY_INVALID", tt.name, r.Status, r.Raw)
		}
	}
	recs, err := e.Store.ListAudit(ctx, ladder.AuditQuery{Actor: k.ID, Kind: ladder.AuditRoute})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if strings.Contains(string(rec.Data), "KV-AFTER") {
			t.Errorf("audit record %d routes %s in the name of the revoked key", rec.Seq, rec.Data)
		}
	}
	if len(recs) != 2 {
		t.Errorf("the revoked key's routes in the audit log: %d; want the 2 made before", len(recs))
	}
}

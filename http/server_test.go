package http_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder/internal/testenv"
)

func TestAuthRefusals(t *testing.T) {
	e := testenv.Start(t, "")
	agent := e.Keys["vantrow-bills/agent"]

	// A revoked key and an expired key are refused like an unknown one.
	admin := e.Keys["vantrow-bills/admin"]
	created := e.Do("POST", "/v1/keys", admin, map[string]any{"workspace": "vantrow-bills", "kind": "agent", "name": "to revoke"})
	if created.Status != 201 {
		t.Fatalf("create key: %d %s", created.Status, created.Raw)
	}
	revoked := created.Body["token"].(string)
	if r := e.Do("POST", "/v1/keys/"+created.Body["id"].(string)+"/revoke", admin, nil); r.Status != 200 {
		t.Fatalf("revoke: %d %s", r.Status, r.Raw)
	}
	exp := e.Do("POST", "/v1/keys", admin, map[string]any{"workspace": "vantrow-bills", "kind": "agent", "expires_in": "1h"})
	expired := exp.Body["token"].(string)
	e.Clock.Advance(2 * time.Hour)

	tests := []struct {
		name, key, code string
		status          int
	}{
		{"no key", "", "KEY_MISSING", 401},
		{"malformed key", "not-a-key", "KEY_INVALID", 401},
		{"unknown key", "ldr_aaaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbb", "KEY_INVALID", 401},
		{"wrong secret", agent[:len(agent)-4] + "aaaa", "KEY_INVALID", 401},
		{"revoked key", revoked, "KEY_INVALID", 401},
		{"expired key", expired, "KEY_INVALID", 401},
		{"human key on the agent route", e.Keys["vantrow-bills/human"], "HUMAN_KEY_REFUSED", 403},
		{"admin key on the agent route", admin, "KEY_KIND_REFUSED", 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.Do("POST", "/v1/route", tt.key, map[string]any{"step": "post_tms", "item": "B-1"})
			if r.Status != tt.status || r.ErrorCode() != tt.code {
				t.Fatalf("got %d %s, want %d %s (%s)", r.Status, r.ErrorCode(), tt.status, tt.code, r.Raw)
			}
			if tt.status == 401 && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without WWW-Authenticate: Bearer (got %q)", r.Header.Get("WWW-Authenticate"))
			}
			if r.ErrorHint() == "" {
				t.Errorf("refusal without a hint: %s", r.Raw)
			}
			if tt.key != "" && strings.Contains(string(r.Raw), tt.key) {
				t.Errorf("the response echoes the key")
			}
		})
	}
}

func TestBodyLimitAndStrictJSON(t *testing.T) {
	e := testenv.Start(t, "")
	agent := e.Keys["vantrow-bills/agent"]
	big := `{"step":"post_tms","item":"` + strings.Repeat("x", 1<<20) + `"}`
	if r := e.Do("POST", "/v1/route", agent, big); r.Status != 413 || r.ErrorCode() != "BODY_TOO_LARGE" {
		t.Fatalf("1 MiB body: got %d %s", r.Status, r.Raw)
	}
	for _, body := range []string{`{"step":"post_tms","step":"read_bill","item":"a"}`, `{"Step":"post_tms","item":"a"}`, `{"step":"post_tms","item":"a","bogus":1}`, `not json`} {
		r := e.Do("POST", "/v1/route", agent, body)
		if r.Status != 400 {
			t.Errorf("%s: got %d %s, want 400", body, r.Status, r.Raw)
		}
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	e := testenv.Start(t, "")
	if r := e.Do("GET", "/healthz", "", nil); r.Status != 200 {
		t.Fatalf("healthz %d", r.Status)
	}
	if r := e.Do("GET", "/readyz", "", nil); r.Status != 200 {
		t.Fatalf("readyz %d %s", r.Status, r.Raw)
	}
	e.Do("POST", "/v1/route", e.Keys["vantrow-bills/agent"], map[string]any{"step": "post_tms", "item": "B-1"})
	r := e.Do("GET", "/metrics", "", nil)
	for _, want := range []string{`ladder_http_requests_total{method="POST",route="POST /v1/route",status="200"} 1`, "ladder_http_request_duration_seconds_bucket"} {
		if !strings.Contains(string(r.Raw), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// A closed store makes the server not ready, once the route's success
	// (at most a second old) no longer answers for the store.
	e.Store.Close()
	for give := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := e.Do("GET", "/readyz", "", nil)
		if r.Status == 503 {
			break
		}
		if time.Now().After(give) {
			t.Fatalf("readyz with a closed store: %d", r.Status)
		}
	}
	_ = context.Background()
}

package http_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ladderhq/ladder/internal/testenv"
)

// TestKeyWithoutBearerSaysSo: a key sent as "Authorization: ldr_…",
// without the Bearer scheme, is refused saying that the scheme is missing
// and showing the header to send, on REST and on /mcp, instead of "no key
// was sent".
func TestKeyWithoutBearerSaysSo(t *testing.T) {
	e := testenv.Start(t, "")
	agent := e.Keys["vantrow-bills/agent"]
	for _, tt := range []struct {
		name, method, path string
		body               any
	}{
		{"REST", "GET", "/v1/steps", nil},
		{"MCP", "POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.DoWith(tt.method, tt.path, "", tt.body, testenv.Header{Name: "Authorization", Value: agent})
			if r.Status != 401 {
				t.Fatalf("status %d, want 401: %s", r.Status, r.Raw)
			}
			raw := string(r.Raw)
			if !strings.Contains(raw, "no Bearer scheme") || !strings.Contains(raw, "Authorization: Bearer ldr_") {
				t.Errorf("the refusal does not say the Bearer scheme is missing: %s", raw)
			}
			if strings.Contains(raw, agent) {
				t.Error("the response echoes the key")
			}
		})
	}
}

// TestWrongMethodIs405: a path served for other methods answers 405 with
// an Allow header naming them (before, the catch-all answered 404); a path
// served for no method is still 404.
func TestWrongMethodIs405(t *testing.T) {
	e := testenv.Start(t, "")
	agent := e.Keys["vantrow-bills/agent"]
	human := e.Keys["vantrow-bills/human"]
	for _, tt := range []struct {
		method, path, key, allow string
		status                   int
	}{
		{"GET", "/v1/route", agent, "POST", 405},
		{"GET", "/v1/outcomes", agent, "POST", 405},
		{"GET", "/v1/approvals/ap_x/approve", human, "POST", 405},
		{"DELETE", "/v1/steps", agent, "GET, HEAD", 405},
		{"GET", "/v1/nothing-here", agent, "", 404},
	} {
		r := e.Do(tt.method, tt.path, tt.key, nil)
		if r.Status != tt.status || r.Header.Get("Allow") != tt.allow {
			t.Errorf("%s %s: %d Allow %q, want %d Allow %q (%s)", tt.method, tt.path, r.Status, r.Header.Get("Allow"), tt.status, tt.allow, r.Raw)
		}
		if tt.status == 405 && (r.ErrorCode() != "METHOD_NOT_ALLOWED" || r.ErrorHint() == "") {
			t.Errorf("%s %s: %s", tt.method, tt.path, r.Raw)
		}
	}
}

// TestListKeysPages: GET /v1/keys honours limit and cursor, like the other
// lists.
func TestListKeysPages(t *testing.T) {
	e := testenv.Start(t, "")
	admin := e.Keys["vantrow-bills/admin"]
	for i := 0; i < 3; i++ {
		if r := e.Do("POST", "/v1/keys", admin, map[string]any{"workspace": "vantrow-bills", "kind": "agent"}); r.Status != 201 {
			t.Fatalf("create key: %d %s", r.Status, r.Raw)
		}
	}
	all := e.Do("GET", "/v1/keys", admin, nil)
	total := len(all.Body["keys"].([]any))
	if total < 4 {
		t.Fatalf("GET /v1/keys: %d keys: %s", total, all.Raw)
	}
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > total {
			t.Fatal("paging does not end")
		}
		r := e.Do("GET", "/v1/keys?limit=2&cursor="+cursor, admin, nil)
		keys := r.Body["keys"].([]any)
		if r.Status != 200 || len(keys) > 2 || len(keys) == 0 {
			t.Fatalf("page %d: %d %s", pages, r.Status, r.Raw)
		}
		for _, k := range keys {
			ids = append(ids, k.(map[string]any)["id"].(string))
		}
		next, _ := r.Body["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	var want []string
	for _, k := range all.Body["keys"].([]any) {
		want = append(want, k.(map[string]any)["id"].(string))
	}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("keys paged by 2 differ from one page (-want +got):\n%s", diff)
	}
	for _, q := range []string{"limit=501", "limit=x", "cursor=bogus"} {
		if r := e.Do("GET", "/v1/keys?"+q, admin, nil); r.Status != 400 {
			t.Errorf("GET /v1/keys?%s: %d %s", q, r.Status, r.Raw)
		}
	}
}

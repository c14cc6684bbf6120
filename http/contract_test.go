package http_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/client"
	"github.com/ladderhq/ladder/internal/testenv"
)

// The root service interfaces have two implementations, the REST client
// and the service bound to a caller in process; asked the same, they
// answer the same JSON.
func TestClientAndCallerAnswerAlike(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	ctx := context.Background()
	token := e.Keys["vantrow-bills/agent"]
	p, err := e.Svc.Authenticate(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	rest := client.New(e.Server.URL, token)
	local := e.Svc.As(p, e.Server.URL)

	type services interface {
		ladder.LadderService
		ladder.GateService
	}
	ask := map[string]func(services) (any, error){
		"steps":    func(s services) (any, error) { return s.Steps(ctx, "") },
		"evidence": func(s services) (any, error) { return s.Evidence(ctx, "", "Decide hold or release") },
		"unknown step": func(s services) (any, error) {
			return s.Evidence(ctx, "", "Reticulate splines")
		},
		"route": func(s services) (any, error) {
			return s.Route(ctx, ladder.RouteRequest{Step: "post_tms", Item: "BILL-CONTRACT"})
		},
		"gate functions": func(s services) (any, error) { return s.GateFunctions(ctx, "") },
	}
	for name, f := range ask {
		t.Run(name, func(t *testing.T) {
			want, wantErr := f(rest)
			got, gotErr := f(local)
			if ladder.ErrorCode(wantErr) != ladder.ErrorCode(gotErr) {
				t.Fatalf("errors differ: REST %v, in process %v", wantErr, gotErr)
			}
			if diff := cmp.Diff(jsonOf(t, want), jsonOf(t, got)); diff != "" {
				t.Errorf("answers differ (-REST +in process):\n%s", diff)
			}
		})
	}
}

func jsonOf(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

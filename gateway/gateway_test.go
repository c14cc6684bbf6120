package gateway_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/gateway"
	"github.com/ladderhq/ladder/internal/testenv"
)

// seeded is one seeded demo server shared by the tests of this file.
func seeded(t *testing.T) *testenv.Env {
	t.Helper()
	return testenv.StartWith(t, "", testenv.Options{Seed: true})
}

// demoFile is the gateway file of the demo's three workspaces of seed 000,
// with its aliases.
func demoFile(e *testenv.Env) *gateway.File {
	f := &gateway.File{Workspaces: map[string]gateway.Workspace{}, Aliases: map[string]string{
		"Check the fuel surcharge": "Rate check",
		"Log location and ETA":     "Capture the ETA",
	}}
	for _, ws := range []string{"vantrow-bills", "checkcall-loads", "iia-gate"} {
		f.Workspaces[ws] = gateway.Workspace{Server: e.Server.URL, Key: e.Keys[ws+"/agent"]}
	}
	return f
}

func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func ask(t *testing.T, g *gateway.Gateway, step string) gateway.Answer {
	t.Helper()
	a, err := g.Ask(context.Background(), step)
	if err != nil {
		t.Fatalf("ask %q: %v", step, err)
	}
	return a
}

func TestAskFound(t *testing.T) {
	e := seeded(t)
	g := gateway.New(demoFile(e), gateway.Options{})
	for _, tc := range []struct {
		query, ws, step, lane, by, alias string
	}{
		{"decide_hold", "vantrow-bills", "decide_hold", "shadow", "id", ""},
		{"Decide hold or release", "vantrow-bills", "decide_hold", "shadow", "name", ""},
		{"decide HOLD or release!", "vantrow-bills", "decide_hold", "shadow", "name", ""},
		{"Post to the TMS", "vantrow-bills", "post_tms", "auto", "name", ""},
		{"capture_eta", "checkcall-loads", "capture_eta", "auto", "id", ""},
		{"late load", "checkcall-loads", "flag_late", "shadow", "containment", ""},
		{"Lock the valuation", "iia-gate", "valuation", "shadow", "name", ""},
		{"Check the fuel surcharge", "vantrow-bills", "rate_check", "propose", "alias", "Check the fuel surcharge"},
		{"check the FUEL surcharge", "vantrow-bills", "rate_check", "propose", "alias", "Check the fuel surcharge"},
		{"Log location and ETA", "checkcall-loads", "capture_eta", "auto", "alias", "Log location and ETA"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			a := ask(t, g, tc.query)
			if a.Status != gateway.StatusFound || a.Workspace != tc.ws || a.Step != tc.step || a.Lane != tc.lane || a.MatchedBy != tc.by || a.Alias != tc.alias {
				t.Fatalf("got %+v", a)
			}
			if a.Rolling4 == nil || a.Rolling4.Accuracy == nil || *a.Rolling4.Accuracy <= 0 || a.Rolling4.Meaning != gateway.AccuracyMeaning {
				t.Fatalf("rolling_4: %+v", a.Rolling4)
			}
			if a.Why == "" || !strings.Contains(a.Answer, "is in "+tc.lane) || !strings.Contains(a.Answer, gateway.AccuracyMeaning) || len(a.Unavailable) != 0 {
				t.Fatalf("answer: %+v", a)
			}
		})
	}
}

func TestAskAmbiguous(t *testing.T) {
	e := seeded(t)
	f := demoFile(e)
	// The same workspace under a second name: every step matches twice.
	f.Workspaces["bills-copy"] = f.Workspaces["vantrow-bills"]
	g := gateway.New(f, gateway.Options{})
	a := ask(t, g, "Post to the TMS")
	if a.Status != gateway.StatusAmbiguous || len(a.Candidates) != 2 || a.Lane != "" || a.Workspace != "" {
		t.Fatalf("got %+v", a)
	}
	got := a.Candidates[0].Workspace + "," + a.Candidates[1].Workspace
	if got != "bills-copy,vantrow-bills" || !strings.Contains(a.Answer, "2 workspaces") || !strings.Contains(a.Answer, "bills-copy") || !strings.Contains(a.Answer, "vantrow-bills") {
		t.Fatalf("candidates %s, answer %q", got, a.Answer)
	}
	// An alias resolves to both too; nothing is picked.
	if a := ask(t, g, "Check the fuel surcharge"); a.Status != gateway.StatusAmbiguous || len(a.Candidates) != 2 {
		t.Fatalf("alias: %+v", a)
	}
	// Containment across the demo's own workspaces: "the t" is in Post to
	// the TMS (vantrow-bills) and Judge the team (iia-gate).
	g = gateway.New(demoFile(e), gateway.Options{})
	a = ask(t, g, "the t")
	if a.Status != gateway.StatusAmbiguous || len(a.Candidates) != 2 || a.Candidates[0].Workspace == a.Candidates[1].Workspace {
		t.Fatalf("across workspaces: %+v", a)
	}
}

func TestAskNotFound(t *testing.T) {
	e := seeded(t)
	g := gateway.New(demoFile(e), gateway.Options{})
	a := ask(t, g, "Reticulate the fuel splines")
	if a.Status != gateway.StatusNotFound || len(a.Nearest) == 0 || len(a.Nearest) > 3 || a.Nearest[0].Name == "" || a.Nearest[0].Workspace == "" {
		t.Fatalf("got %+v", a)
	}
	if !strings.Contains(a.Answer, "nearest names") || !strings.Contains(a.Answer, "which_steps_run_alone") {
		t.Fatalf("answer %q", a.Answer)
	}
	if _, err := g.Ask(context.Background(), "  "); ladder.ErrorCode(err) != ladder.CodeInvalidArgument {
		t.Fatalf("empty step: %v", err)
	}
}

func TestAskWithWorkspaceDown(t *testing.T) {
	e := seeded(t)
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hang.Close()
	defer close(release)
	f := demoFile(e)
	f.Workspaces["down"] = gateway.Workspace{Server: closedURL(t), Key: "lk_x"}
	f.Workspaces["refused"] = gateway.Workspace{Server: e.Server.URL, Key: "lk_not_a_key"}
	f.Workspaces["human"] = gateway.Workspace{Server: e.Server.URL, Key: e.Keys["checkcall-loads/human"]}
	f.Workspaces["no-env"] = gateway.Workspace{Server: e.Server.URL, KeyEnv: "LADDER_TEST_UNSET"}
	f.Workspaces["slow"] = gateway.Workspace{Server: hang.URL, Key: "lk_x"}
	g := gateway.New(f, gateway.Options{Timeout: 500 * time.Millisecond, Getenv: func(string) string { return "" }})

	start := time.Now()
	a := ask(t, g, "Capture the ETA")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s; workspaces are not asked concurrently with a timeout", d)
	}
	if a.Status != gateway.StatusFound || a.Workspace != "checkcall-loads" || a.Rolling4.Accuracy == nil {
		t.Fatalf("got %+v", a)
	}
	want := map[string]ladder.Code{
		"down":    ladder.CodeServerUnreachable,
		"refused": ladder.CodeKeyInvalid,
		"human":   ladder.CodeHumanKeyRefused,
		"no-env":  ladder.CodeKeyMissing,
		"slow":    ladder.CodeUpstreamTimeout,
	}
	got := map[string]ladder.Code{}
	for _, u := range a.Unavailable {
		got[u.Workspace] = u.Code
		if !strings.Contains(a.Answer, u.Workspace+" ("+string(u.Code)) {
			t.Errorf("answer %q does not name %s", a.Answer, u.Workspace)
		}
	}
	for ws, code := range want {
		if got[ws] != code {
			t.Errorf("%s: got %s, want %s", ws, got[ws], code)
		}
	}

	// A nonsense name still gets the nearest names of those that answered,
	// and the answer says some did not.
	a = ask(t, g, "Reticulate splines")
	if a.Status != gateway.StatusNotFound || len(a.Nearest) == 0 || !strings.Contains(a.Answer, "did not answer") {
		t.Fatalf("not found: %+v", a)
	}

	// Every workspace down.
	g = gateway.New(&gateway.File{Workspaces: map[string]gateway.Workspace{"down": {Server: closedURL(t), Key: "k"}}}, gateway.Options{})
	a = ask(t, g, "Capture the ETA")
	if a.Status != gateway.StatusUnavailable || len(a.Unavailable) != 1 || !strings.Contains(a.Answer, "down (SERVER_UNREACHABLE") {
		t.Fatalf("all down: %+v", a)
	}
}

func TestKeyEnv(t *testing.T) {
	e := seeded(t)
	f := &gateway.File{Workspaces: map[string]gateway.Workspace{"iia-gate": {Server: e.Server.URL, KeyEnv: "IIA_KEY"}}}
	g := gateway.New(f, gateway.Options{Getenv: func(k string) string {
		if k == "IIA_KEY" {
			return e.Keys["iia-gate/agent"]
		}
		return ""
	}})
	if a := ask(t, g, "invest_decision"); a.Status != gateway.StatusFound || a.Lane != "propose" {
		t.Fatalf("got %+v", a)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/gateway"
)

// seed000Steps are the live step names of seed 000's three workspaces, read
// from the demo config.
func seed000Steps(t *testing.T) map[string][]string {
	t.Helper()
	cfg, err := config.Parse("demo.yaml", config.Demo())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, w := range cfg.Workspaces {
		switch w.ID {
		case "vantrow-bills", "checkcall-loads", "iia-gate":
			for _, q := range w.Queues {
				for _, s := range q.Steps {
					out[w.ID] = append(out[w.ID], s.Name)
				}
			}
		}
	}
	if len(out["vantrow-bills"]) != 7 || len(out["checkcall-loads"]) != 4 || len(out["iia-gate"]) != 3 {
		t.Fatalf("demo steps: %v", out)
	}
	return out
}

// waitFile waits for the demo to write its gateway file.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if data, err := os.ReadFile(path); err == nil && bytes.Contains(data, []byte("aliases:")) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo did not write %s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEndToEndGateway starts the demo binary and `ladder gateway --stdio`
// on the gateway file the demo wrote, and asks ask_autonomy_ladder for
// every live step name of seed 000 and each alias with the go-sdk client.
func TestEndToEndGateway(t *testing.T) {
	gwFile := filepath.Join(t.TempDir(), "gateway.yaml")
	d := startDemo(t, "--gateway", gwFile)
	waitFile(t, gwFile)
	f, err := gateway.Load(gwFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, ws := range []string{"vantrow-bills", "checkcall-loads", "iia-gate"} {
		if w := f.Workspaces[ws]; w.Server != d.URL || w.Key != d.Keys.Workspaces[ws]["agent"] {
			t.Fatalf("gateway file workspace %s: %+v", ws, w)
		}
	}
	if f.Aliases["Check the fuel surcharge"] != "Rate check" || f.Aliases["Log location and ETA"] != "Capture the ETA" {
		t.Fatalf("aliases: %v", f.Aliases)
	}

	cmd := exec.Command(ladderBinary(t), "gateway", "--stdio", "--gateway", gwFile)
	cmd.Stderr = os.Stderr
	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e-gateway", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 1 || list.Tools[0].Name != "ask_autonomy_ladder" || list.Tools[0].OutputSchema == nil {
		t.Fatalf("tools/list: %+v", list.Tools)
	}

	ask := func(t *testing.T, step string) (*sdk.CallToolResult, gateway.Answer) {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "ask_autonomy_ladder", Arguments: map[string]any{"step": step}})
		if err != nil {
			t.Fatalf("tools/call %q: %v", step, err)
		}
		var a gateway.Answer
		data, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(data, &a); err != nil {
			t.Fatalf("structuredContent: %v", err)
		}
		return res, a
	}
	checkFound := func(t *testing.T, res *sdk.CallToolResult, a gateway.Answer, ws, name string) {
		t.Helper()
		if res.IsError || a.Status != gateway.StatusFound || a.Workspace != ws || a.Name != name || a.Lane == "" || a.Why == "" || a.Rolling4 == nil {
			t.Fatalf("got %+v", a)
		}
		if a.Rolling4.Accuracy == nil && (a.Lane != "human_only" || a.Rolling4.N != 0) {
			t.Fatalf("%s: no rolling-4 accuracy in lane %s with %d reviews", name, a.Lane, a.Rolling4.N)
		}
		if a.Rolling4.Accuracy != nil && (*a.Rolling4.Accuracy <= 0 || *a.Rolling4.Accuracy > 1) {
			t.Fatalf("%s: accuracy %v", name, *a.Rolling4.Accuracy)
		}
		text := res.Content[0].(*sdk.TextContent).Text
		if !strings.Contains(text, "is in "+a.Lane) || !strings.Contains(text, gateway.AccuracyMeaning) {
			t.Fatalf("text %q", text)
		}
	}

	for ws, names := range seed000Steps(t) {
		for _, name := range names {
			t.Run(ws+"/"+name, func(t *testing.T) {
				res, a := ask(t, name)
				checkFound(t, res, a, ws, name)
			})
		}
	}
	for alias, live := range map[string]struct{ ws, name string }{
		"Check the fuel surcharge": {"vantrow-bills", "Rate check"},
		"Log location and ETA":     {"checkcall-loads", "Capture the ETA"},
	} {
		t.Run("alias/"+alias, func(t *testing.T) {
			res, a := ask(t, alias)
			checkFound(t, res, a, live.ws, live.name)
			if a.MatchedBy != "alias" || a.Alias != alias || a.Rolling4.Accuracy == nil {
				t.Fatalf("alias: %+v", a)
			}
		})
	}
	t.Run("nonsense", func(t *testing.T) {
		res, a := ask(t, "Reticulate the splines")
		if !res.IsError || a.Status != gateway.StatusNotFound || len(a.Nearest) == 0 || a.Nearest[0].Name == "" {
			t.Fatalf("got %+v", a)
		}
		if text := res.Content[0].(*sdk.TextContent).Text; !strings.Contains(text, "nearest names are: "+a.Nearest[0].Name) {
			t.Fatalf("text %q", text)
		}
	})

	// ladder ask, in-process, on the same file.
	t.Run("ladder ask", func(t *testing.T) {
		var out, errb bytes.Buffer
		getenv := func(string) string { return "" }
		if err := run(ctx, []string{"ask", "Check the fuel surcharge", "--gateway", gwFile}, getenv, strings.NewReader(""), &out, &errb); err != nil {
			t.Fatalf("%v\n%s", err, errb.String())
		}
		if !strings.HasPrefix(out.String(), "Rate check (vantrow-bills · bills/rate_check) is in propose.") || !strings.Contains(out.String(), gateway.AccuracyMeaning) {
			t.Fatalf("human answer:\n%s", out.String())
		}
		out.Reset()
		if err := run(ctx, []string{"ask", "--json", "Log location and ETA", "--gateway", gwFile}, getenv, strings.NewReader(""), &out, &errb); err != nil {
			t.Fatal(err)
		}
		var a gateway.Answer
		if err := json.Unmarshal(out.Bytes(), &a); err != nil || a.Step != "capture_eta" || a.Rolling4 == nil || a.Rolling4.Accuracy == nil {
			t.Fatalf("--json: %v %s", err, out.String())
		}
		out.Reset()
		err := run(ctx, []string{"ask", "Reticulate the splines", "--gateway", gwFile}, getenv, strings.NewReader(""), &out, &errb)
		if ee, ok := err.(exitError); !ok || ee.code != 1 || !strings.Contains(out.String(), "Nearest names:") {
			t.Fatalf("nonsense: %v\n%s", err, out.String())
		}
	})
}

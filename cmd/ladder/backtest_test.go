package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/demo"
)

func TestBacktest(t *testing.T) {
	cfgPath := writeDemoConfig(t)
	db := filepath.Join(t.TempDir(), "ladder.db")
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStackWith(context.Background(), cfg, db, func(string) string { return "" }, newLogger(&strings.Builder{}), stackOptions{noSteps: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := demo.Seed(context.Background(), st.svc, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	st.Close()

	ends := func(out string) map[string]ladder.BacktestStep {
		t.Helper()
		var steps []ladder.BacktestStep
		if err := json.Unmarshal([]byte(out), &steps); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		m := map[string]ladder.BacktestStep{}
		for _, s := range steps {
			m[s.Step] = s
		}
		return m
	}
	out, _, err := runCLI(t, nil, "backtest", "--config", cfgPath, "--db", db, "--since", "15w", "--workspace", "vantrow-bills", "--json")
	if err != nil {
		t.Fatal(err)
	}
	post := ends(out)["post_tms"]
	if post.EndSim != "auto" || len(post.Actual) != 2 || len(post.Simulated) != 2 || post.Simulated[1].Rule != post.Actual[1].Rule {
		t.Fatalf("post_tms under the rules in force: %+v", post)
	}

	strict := filepath.Join(t.TempDir(), "strict.yaml")
	os.WriteFile(strict, []byte("class_a: {auto_lower: 0.999}\n"), 0o644)
	out, _, err = runCLI(t, nil, "backtest", "--config", cfgPath, "--db", db, "--since", "15w", "--rules", strict, "--workspace", "vantrow-bills", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if post := ends(out)["post_tms"]; post.EndSim != "propose" || post.EndActual != "auto" {
		t.Fatalf("post_tms under stricter rules: %+v", post)
	}
	text, _, err := runCLI(t, nil, "backtest", "--config", cfgPath, "--db", db, "--since", "15w", "--rules", strict)
	if err != nil || !strings.Contains(text, "HAPPENED") || !strings.Contains(text, "propose→auto (propose_to_auto)") {
		t.Fatalf("text output: %v\n%s", err, text)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("class_c: {}\n"), 0o644)
	if _, _, err := runCLI(t, nil, "backtest", "--config", cfgPath, "--db", db, "--rules", bad); exitCode(err) != 3 {
		t.Fatalf("bad rules file: %v", err)
	}
}

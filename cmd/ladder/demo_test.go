package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/internal/testenv"
)

// TestSecondDemoOnABusyPort starts one demo in-process, then a second on
// the same --addr with the same --keys file: the second fails at once
// naming the address, and the first demo's keys file is unchanged (before,
// the second seeded, overwrote the keys with its own, then failed to bind).
// The banner names the console and the key that signs in there, the
// database and the files.
func TestSecondDemoOnABusyPort(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	keysFile, gwFile, db := filepath.Join(dir, "keys.json"), filepath.Join(dir, "gateway.yaml"), filepath.Join(dir, "demo.db")
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr testenv.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--addr", addr, "--db", db, "--keys", keysFile, "--gateway", gwFile},
			func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("demo did not stop within 20s of its context ending")
		}
	}()
	// Seeding imports ~40k rows through the engine: seconds in a normal
	// build, minutes under -race on a busy machine.
	deadline := time.Now().Add(5 * time.Minute)
	for !strings.Contains(stdout.String(), "Press Ctrl-C") {
		if time.Now().After(deadline) {
			t.Fatalf("demo not ready in 5 minutes\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
		select {
		case err := <-done:
			t.Fatalf("demo ended early: %v\n%s", err, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	banner := stdout.String()
	keys := readDemoKeys(t, keysFile)
	for _, want := range []string{
		"http://" + addr + "/console/", keys.Workspaces["vantrow-bills"]["human"],
		"Database: " + db, "Keys:     " + keysFile, "Gateway:  " + gwFile,
	} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}

	before := readFile(t, keysFile)
	start := time.Now()
	_, _, err := runCLI(t, nil, "demo", "--addr", addr, "--db", filepath.Join(dir, "second.db"), "--keys", keysFile, "--gateway", filepath.Join(dir, "gw2.yaml"))
	if exitCode(err) != 3 || !strings.Contains(err.Error(), addr) {
		t.Errorf("second demo on %s: exit %d, %v; want an error naming the address", addr, exitCode(err), err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("second demo took %s to fail; it should fail before seeding", d)
	}
	if after := readFile(t, keysFile); !bytes.Equal(before, after) {
		t.Errorf("the second demo rewrote the running demo's keys file:\nbefore %s\nafter  %s", before, after)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readDemoKeys(t *testing.T, path string) demoKeys {
	t.Helper()
	var k demoKeys
	if err := json.Unmarshal(readFile(t, path), &k); err != nil {
		t.Fatalf("keys file %s: %v", path, err)
	}
	return k
}

// TestPrintedDemoConfigTellsTheTruth: the printed config's schema comment
// names a file that exists from the repository root (where the README
// writes ladder.yaml), and its comment on demo: URLs says what serve does
// with them and what to put instead.
func TestPrintedDemoConfigTellsTheTruth(t *testing.T) {
	out, _, err := runCLI(t, nil, "demo", "--print-config")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(out, "\n")
	schema, ok := strings.CutPrefix(first, "# yaml-language-server: $schema=")
	if !ok {
		t.Fatalf("first line %q is not a schema comment", first)
	}
	if _, err := os.Stat(filepath.Join("..", "..", schema)); err != nil {
		t.Errorf("$schema=%s does not resolve from the repository root: %v", schema, err)
	}
	if strings.Contains(out, "serve` refuses them") {
		t.Error("the config says serve refuses demo: URLs; serve runs the stand-ins with a warning")
	}
	for _, want := range []string{"by `ladder serve` with a warning", "replace each with the real system's http(s):// URL"} {
		if !strings.Contains(out, want) {
			t.Errorf("printed config lacks %q", want)
		}
	}
	if _, err := config.Parse("printed.yaml", []byte(out)); err != nil {
		t.Errorf("the printed config does not parse: %v", err)
	}
}

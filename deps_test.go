package ladder_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/ladderhq/ladder"

// The layout of DESIGN.md §9, as imports: the clients depend on the domain
// (where the request, answer and view types and the service interfaces
// live), never on the service, the gate's CEL engine or a store; and no
// surface reaches a store around the service.
func TestLayering(t *testing.T) {
	stores := []string{module + "/sqlite", module + "/postgres", "modernc.org/sqlite", "github.com/jackc/pgx"}
	clientsMayNot := append([]string{module + "/service", "github.com/google/cel-go", "cel.dev/expr"}, stores...)
	tests := []struct {
		pkgs      []string
		forbidden []string
		why       string
	}{
		{[]string{"client", "gateway"}, clientsMayNot, "a client depends on the domain's contract alone"},
		{[]string{"http", "mcp", "console", "client", "gateway", "demo"}, stores, "a surface reaches the store only through the service"},
		{[]string{"http", "mcp", "service", "upstream", "sqlite", "postgres"}, []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "google.golang.org/grpc"},
			"instrumented packages use the OpenTelemetry API through an injected TracerProvider; the SDK and the exporters are package telemetry's"},
	}
	graph := listDeps(t, "./http", "./mcp", "./console", "./client", "./gateway", "./demo", "./service", "./upstream", "./sqlite", "./postgres")
	for _, tt := range tests {
		for _, p := range tt.pkgs {
			for _, chain := range forbiddenChains(graph, module+"/"+p, tt.forbidden) {
				t.Errorf("%s imports %s (%s):\n\t%s", p, chain[len(chain)-1], tt.why, strings.Join(chain, "\n\t→ "))
			}
		}
	}
}

// listDeps runs go list -deps -json on pkgs and returns every listed
// package's direct imports, keyed by import path.
func listDeps(t *testing.T, pkgs ...string) map[string][]string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		if root := os.Getenv("GOROOT"); root != "" {
			goBin = filepath.Join(root, "bin", "go")
		}
	}
	if goBin == "" {
		t.Skip("no go command to list dependencies with")
	}
	var stderr bytes.Buffer
	cmd := exec.Command(goBin, append([]string{"list", "-deps", "-json"}, pkgs...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		graph[p.ImportPath] = p.Imports
	}
	if len(graph) == 0 {
		t.Fatal("go list listed no packages")
	}
	return graph
}

// forbiddenChains walks the imports of from breadth-first, not past a
// forbidden package, and returns for each forbidden path it reaches (the
// path itself or a package under it) the shortest import chain to it.
func forbiddenChains(graph map[string][]string, from string, forbidden []string) [][]string {
	rule := func(p string) string {
		for _, f := range forbidden {
			if p == f || strings.HasPrefix(p, f+"/") {
				return f
			}
		}
		return ""
	}
	reported := map[string]bool{}
	parent := map[string]string{from: ""}
	queue := []string{from}
	var chains [][]string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range graph[p] {
			if _, seen := parent[imp]; seen {
				continue
			}
			parent[imp] = p
			if f := rule(imp); f != "" {
				if reported[f] {
					continue
				}
				reported[f] = true
				var chain []string
				for q := imp; q != ""; q = parent[q] {
					chain = append([]string{q}, chain...)
				}
				chains = append(chains, chain)
				continue
			}
			queue = append(queue, imp)
		}
	}
	return chains
}

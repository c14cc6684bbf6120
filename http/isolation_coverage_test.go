package http_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestIsolationCoverage fails when a route or tool has no row.
func TestIsolationCoverage(t *testing.T) {
	var table []string
	for _, r := range isoRESTRows() {
		table = append(table, r.pattern)
	}
	isoCompareSets(t, "REST route", isoRegisteredPatterns(t, "."), table)
	table = nil
	for _, r := range isoConsoleRows() {
		table = append(table, r.pattern)
	}
	isoCompareSets(t, "console route", isoRegisteredPatterns(t, "../console"), table)

	f := newIsoFixture(t)
	tools := map[string]bool{}
	for _, ws := range f.e.Svc.WorkspaceIDs() {
		r := f.e.Do("POST", "/mcp", f.e.Keys[ws+"/agent"], isoRPC(1, "tools/list", map[string]any{}))
		var out struct {
			Result struct {
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
			} `json:"result"`
		}
		if err := json.Unmarshal(r.Raw, &out); err != nil || len(out.Result.Tools) == 0 {
			t.Fatalf("tools/list for %s: %d %s", ws, r.Status, r.Raw)
		}
		for _, tl := range out.Result.Tools {
			tools[tl.Name] = true
		}
	}
	var listed []string
	for n := range tools {
		listed = append(listed, n)
	}
	table = nil
	for _, r := range isoMCPRows(f) {
		table = append(table, r.tool)
	}
	isoCompareSets(t, "MCP tool", listed, table)
}

func isoCompareSets(t *testing.T, what string, registered, table []string) {
	t.Helper()
	for _, p := range registered {
		if !slices.Contains(table, p) {
			t.Errorf("%s %q has no row in the isolation matrix (http/isolation_test.go); add one", what, p)
		}
	}
	for _, p := range table {
		if !slices.Contains(registered, p) {
			t.Errorf("the isolation matrix has a row for %s %q, which is not registered", what, p)
		}
	}
}

// isoRegisteredPatterns parses the non-test Go files of dir for route
// registrations: calls of handle, Handle or HandleFunc whose first argument
// is a string literal.
func isoRegisteredPatterns(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch sel.Sel.Name {
			case "handle", "Handle", "HandleFunc":
			default:
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				if _, isIdent := call.Args[0].(*ast.Ident); isIdent && sel.Sel.Name != "handle" {
					// s.mux.Handle(pattern, h) for the mounts: their
					// patterns come from the caller.
					return true
				}
				t.Errorf("%s: a route registered with a non-literal pattern; the isolation matrix cannot see it", fset.Position(call.Pos()))
				return true
			}
			p, _ := strconv.Unquote(lit.Value)
			out = append(out, p)
			return true
		})
	}
	sort.Strings(out)
	if len(out) < 5 {
		t.Fatalf("found only %d routes in %s: %v", len(out), dir, out)
	}
	return out
}

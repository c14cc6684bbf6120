package ladder_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
)

func TestRenderNamesEachOperationInTheReadersTerms(t *testing.T) {
	hint := "retry; {{steps}} shows it, or retry it ({{approval_retry ap_1}})"
	want := map[ladder.Surface]string{
		ladder.SurfaceREST:    "retry; GET /v1/steps shows it, or retry it (POST /v1/approvals/ap_1/retry)",
		ladder.SurfaceMCP:     "retry; which_steps_run_alone shows it, or retry it (a person's retry of ap_1 (console, ladder approvals retry or POST /v1/approvals/ap_1/retry))",
		ladder.SurfaceCLI:     "retry; ladder steps shows it, or retry it (ladder approvals retry ap_1)",
		ladder.SurfaceConsole: "retry; the Steps page shows it, or retry it (the approval's Retry button)",
	}
	for s, w := range want {
		e := (&ladder.Error{Code: ladder.CodeConflict, Message: "Nothing was done.", Hint: hint}).Render(s)
		if diff := cmp.Diff(w, e.Hint); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s, diff)
		}
	}
	// Text that names no operation, an unknown token and an unclosed one
	// come through unchanged.
	for _, text := range []string{"plain", "{{nope}} stays", "open {{steps", "{queue} is a path part"} {
		if got := ladder.RenderText(text, ladder.SurfaceCLI); got != text {
			t.Errorf("RenderText(%q) = %q", text, got)
		}
	}
	if got := ladder.ParseSurface(ladder.SurfaceCLI.String()); got != ladder.SurfaceCLI {
		t.Errorf("ParseSurface(cli) = %v", got)
	}
}

// TestEveryOperationTokenIsKnown walks every string literal of the module
// and checks each {{op}} it writes names an operation of the table, so no
// reader ever sees a raw token.
func TestEveryOperationTokenIsKnown(t *testing.T) {
	tok := regexp.MustCompile(`\{\{([a-z_]+)`)
	known := ladder.OpTokens()
	used := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "bench" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, m := range tok.FindAllStringSubmatch(s, -1) {
				used[m[1]] = true
				if !slices.Contains(known, m[1]) {
					t.Errorf("%s: {{%s}} names no operation (known: %v)", fset.Position(lit.Pos()), m[1], known)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !used["steps"] || !used["approval_retry"] {
		t.Fatalf("the walk found no tokens (%v): it is not reading the code", used)
	}
	for _, op := range known {
		for s := ladder.SurfaceREST; s <= ladder.SurfaceConsole; s++ {
			if ladder.OpName(op, "x", s) == "" {
				t.Errorf("%s has no name on %s", op, s)
			}
		}
	}
}

package ladder_test

import (
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// isSentence reports whether a refusal message (or the format of one) is a
// sentence: it starts with a capital letter and ends with a full stop, a
// question mark or an exclamation mark.
func isSentence(s string) bool {
	s = strings.TrimSpace(s)
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	return unicode.IsUpper(first) && strings.ContainsRune(".?!", last)
}

// messageArg is the index of the message argument of each function that
// builds a *ladder.Error from one: the root constructors and the helpers
// that pass a caller's sentence through.
var messageArg = map[string]int{
	"Refused": 1, "NotFound": 1, "InvalidField": 1, "Errorf": 2,
	"rateLimited": 1, "upstreamFailed": 1, "tokenInvalid": 0,
}

// passedThrough are Message expressions that are not literals, by file: a
// helper's parameter whose call sites this test checks, or a sentence the
// server already wrote (the client re-reads refusals it was sent).
var passedThrough = map[string][]string{
	"error.go":             {"message", "fmt.Sprintf(format, args...)"},
	"service/gate.go":      {"msg"}, // unknownCase and the unknown function: sentences built just above
	"service/limits.go":    {"msg"},
	"oauth/oauth.go":       {"fmt.Sprintf(format, args...)"}, // tokenInvalid: its callers' formats are checked
	"console/oidc.go":      {"msg", "e.Message"},             // refuse's literal sentences just below it; oauth's mapping refusal
	"upstream/upstream.go": {"msg"},
	"client/mcp.go":        {"strings.TrimSpace(msg)", "msg"},
	"gateway/gateway.go":   {"c.err.Message", "e.Message"},
}

// TestEveryRefusalMessageIsASentence walks every non-test Go file and
// checks the message of every *ladder.Error it builds — Error literals'
// Message fields and the constructors' message arguments — so a bare code
// ("STEP_NEEDS_PERSON") or a lowercase fragment fails here, before any
// surface renders it.
func TestEveryRefusalMessageIsASentence(t *testing.T) {
	fset := token.NewFileSet()
	var bad []string
	check := func(file string, expr ast.Expr) {
		pos := fset.Position(expr.Pos())
		where := file + ":" + strconv.Itoa(pos.Line)
		src := exprString(fset, expr)
		for _, ok := range passedThrough[file] {
			if src == ok {
				return
			}
		}
		if msg, ok := messageText(expr); ok {
			if !isSentence(msg) {
				bad = append(bad, where+": "+strconv.Quote(msg))
			}
			return
		}
		bad = append(bad, where+": message "+src+" is not a literal this test can read; build it from a sentence literal")
	}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		file := filepath.ToSlash(path)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if !isErrorType(n.Type) {
					return true
				}
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Message" {
							check(file, kv.Value)
						}
					}
				}
			case *ast.CallExpr:
				name := ""
				switch fn := n.Fun.(type) {
				case *ast.Ident:
					name = fn.Name
				case *ast.SelectorExpr:
					if x, ok := fn.X.(*ast.Ident); ok && x.Name == "ladder" {
						name = fn.Sel.Name
					}
				}
				if i, ok := messageArg[name]; ok && i < len(n.Args) {
					check(file, n.Args[i])
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("refusal message is not a sentence: %s", b)
	}
}

// isErrorType reports whether a composite literal's type is ladder.Error
// (or Error inside the root package).
func isErrorType(e ast.Expr) bool {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name == "Error"
	case *ast.SelectorExpr:
		x, ok := t.X.(*ast.Ident)
		return ok && x.Name == "ladder" && t.Sel.Name == "Error"
	}
	return false
}

// messageText returns the text a message expression starts and ends with:
// a string literal, the format of fmt.Sprintf, or a concatenation whose
// first and last parts are literals (joined, so both ends are checked).
func messageText(e ast.Expr) (string, bool) {
	switch v := e.(type) {
	case *ast.BasicLit:
		if v.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(v.Value)
		return s, err == nil
	case *ast.CallExpr:
		if sel, ok := v.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Sprintf" && len(v.Args) > 0 {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "fmt" {
				return messageText(v.Args[0])
			}
		}
	case *ast.BinaryExpr:
		if v.Op != token.ADD {
			return "", false
		}
		// An unreadable part reads as "x": it may sit in the middle, but a
		// sentence must start and end with a literal.
		l, lok := messageText(v.X)
		r, rok := messageText(v.Y)
		if !lok && !rok {
			return "", false
		}
		if !lok {
			l = "x"
		}
		if !rok {
			r = "x"
		}
		return l + r, true
	}
	return "", false
}

func exprString(fset *token.FileSet, e ast.Expr) string {
	var b strings.Builder
	_ = printer.Fprint(&b, fset, e)
	return b.String()
}

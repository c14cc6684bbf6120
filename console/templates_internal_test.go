package console

import (
	"io/fs"
	"path"
	"strings"
	"testing"
)

// TestPagesParse checks that every page template parses with the layout
// and partials: the console parses them on its first page, not at start,
// so this is where a template that does not parse shows before a person
// meets it.
func TestPagesParse(t *testing.T) {
	names, err := fs.Glob(assets, "assets/templates/*.html")
	if err != nil {
		t.Fatal(err)
	}
	got := parsePages()
	n := 0
	for _, f := range names {
		b := path.Base(f)
		if strings.HasPrefix(b, "_") {
			continue
		}
		n++
		page := strings.TrimSuffix(b, ".html")
		if got[page] == nil {
			t.Errorf("no template for page %s", page)
		}
	}
	if n == 0 || len(got) != n {
		t.Errorf("%d templates for %d pages", len(got), n)
	}
}

package mcp

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestSchemaDocs checks that every shared schema document is its schema:
// the same JSON as the map loadSchema builds (with its shared
// definitions), so a tool listed from the shared document lists what a
// workspace's own copy listed, and that a document is one value every
// caller shares, not a copy per tool and workspace.
func TestSchemaDocs(t *testing.T) {
	docs := schemaDocs()
	files, err := schemaFiles.ReadDir("schemas")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != len(files) || len(docs) == 0 {
		t.Fatalf("%d schema documents for %d files in schemas/", len(docs), len(files))
	}
	for name, doc := range docs {
		var got map[string]any
		if err := json.Unmarshal(doc, &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := loadSchema(name); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the shared document is not the schema:\n%s", name, doc)
		}
	}
	a, b := schemaDoc("route_item.in"), schemaDoc("route_item.in")
	if &a[0] != &b[0] {
		t.Error("schemaDoc returned two copies of route_item.in; every workspace should share one")
	}
}

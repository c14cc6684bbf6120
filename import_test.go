package ladder_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
)

// TestParseImport: the file contract is strict, and every refusal names
// its line and field.
func TestParseImport(t *testing.T) {
	type where struct {
		Line  int
		Field string
	}
	tests := []struct {
		name, format, data string
		rows               int
		bad                []where
	}{
		{"jsonl", "jsonl", `{"type":"review","at":"2026-09-01T10:00:00Z","step":"s","item":"i","lane":"shadow","verdict":"agree"}` + "\n\n" +
			`{"type":"outcome","at":"2026-09-01T10:00:00+02:00","queue":"q","step":"s","item":"i","handled_by":"agent","ok":false}`, 2, nil},
		{"csv with a byte-order mark and columns in any order", "csv", "\ufeffverdict,type,at,step,item\nagree,audit,2026-09-01T10:00:00Z,s,i\n", 1, nil},
		{"unknown field", "jsonl", `{"type":"audit","at":"2026-09-01T10:00:00Z","step":"s","item":"i","verdict":"agree","colour":"red"}`, 0, []where{{1, "colour"}}},
		{"wrong type", "jsonl", `{"type":"audit","at":"2026-09-01T10:00:00Z","step":"s","item":"i","verdict":"agree","severity":"high"}`, 0, []where{{1, "severity"}}},
		{"unknown column", "csv", "type,at,step,item,colour\n", 0, []where{{1, "colour"}}},
		{"duplicate column", "csv", "type,at,step,item,item\n", 0, []where{{1, "item"}}},
		{"short row", "csv", "type,at,step,item,verdict\naudit,2026-09-01T10:00:00Z,s,i\n", 0, []where{{2, ""}}},
		{"bad values", "csv", "type,at,step,item,lane,verdict,severity,ok\nreview,2026-09-01,s,i,auto,agree,2,\n", 0,
			[]where{{2, "at"}, {2, "lane"}, {2, "severity"}}},
		{"outcome without ok", "jsonl", `{"type":"outcome","at":"2026-09-01T10:00:00Z","step":"s","item":"i","handled_by":"person"}`, 0, []where{{1, "ok"}}},
		{"empty", "csv", "type,at,step,item\n", 0, []where{{1, ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, bad, err := ladder.ParseImport([]byte(tt.data), tt.format)
			if err != nil {
				t.Fatal(err)
			}
			var got []where
			for _, b := range bad {
				if !strings.HasSuffix(b.Message, ".") {
					t.Errorf("line %d: message %q is not a sentence", b.Line, b.Message)
				}
				got = append(got, where{b.Line, b.Field})
			}
			if diff := cmp.Diff(tt.bad, got); diff != "" {
				t.Errorf("bad rows (-want +got):\n%s", diff)
			}
			if len(bad) == 0 && len(rows) != tt.rows {
				t.Errorf("%d rows, want %d", len(rows), tt.rows)
			}
		})
	}
	var many strings.Builder
	for i := range 50 {
		fmt.Fprintf(&many, `{"type":"nope","at":"2026-09-01T10:00:00Z","step":"s","item":"i%d"}`+"\n", i)
	}
	if _, bad, _ := ladder.ParseImport([]byte(many.String()), "jsonl"); len(bad) != ladder.MaxImportErrors || bad[0].Line != 1 {
		t.Errorf("50 bad rows gave %d refusals starting at line %d, want %d from line 1", len(bad), bad[0].Line, ladder.MaxImportErrors)
	}
	if _, _, err := ladder.ParseImport(nil, "xml"); ladder.AsError(err).Code != ladder.CodeInvalidArgument {
		t.Errorf("format xml: %v", err)
	}
}

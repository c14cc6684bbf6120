package config

import (
	"strings"
	"testing"
)

// FuzzParse feeds Parse arbitrary bytes. It must never panic or hang, a
// failure must be reported as *Error values naming the file, and a success
// must hold only checked values. The seed corpus is in
// testdata/fuzz/FuzzParse; the demo config is added here.
func FuzzParse(f *testing.F) {
	f.Add(Demo())
	f.Add([]byte(with("            lane: autp")))
	f.Add([]byte(gateDocFn("        R: |", "          evidence.ok ?", "            1.0 : evidenc.x")))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.yaml", data)
		if err != nil {
			if c != nil {
				t.Fatal("Parse returned a config and an error")
			}
			errs := Errors(err)
			if len(errs) == 0 {
				t.Fatalf("error holds no *Error: %v", err)
			}
			for _, e := range errs {
				if e.File != "f.yaml" || e.Msg == "" || e.Line < 0 {
					t.Fatalf("malformed fault %#v", e)
				}
			}
			return
		}
		for i := range c.Workspaces {
			w := &c.Workspaces[i]
			if w.ID == "" || w.Gate() == nil {
				t.Fatalf("workspace %d: id %q, gate %v", i, w.ID, w.Gate())
			}
			for _, s := range w.Steps() {
				if !s.StartLane.Valid() || (s.Class != "A" && s.Class != "B") || (s.MoneyMoving && s.Class != "A") {
					t.Fatalf("step %+v", s)
				}
				if got, ok := w.FindStep(s.Queue, s.ID); !ok || got.ID != s.ID {
					t.Fatalf("FindStep(%q, %q) = %v", s.Queue, s.ID, ok)
				}
			}
			for _, cp := range w.Capabilities {
				if !strings.Contains(cp.ID, ":") || cp.Executor.Timeout <= 0 {
					t.Fatalf("capability %+v", cp)
				}
				if cp.Step != "" {
					if _, ok := w.FindStep("", cp.Step); !ok {
						t.Fatalf("capability %s: step %q does not resolve", cp.ID, cp.Step)
					}
				}
			}
		}
	})
}

package gateway

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	f, err := Parse("gw.yaml", []byte(`
timeout: 3s
workspaces:
  vantrow-bills:
    server: http://127.0.0.1:8080
    key: lk_abc
  checkcall-loads:
    server: https://ladder.example.com/
    key_env: CHECKCALL_KEY
aliases:
  Check the fuel surcharge: Rate check
`))
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(f.Timeout) != 3*time.Second || f.Workspaces["checkcall-loads"].KeyEnv != "CHECKCALL_KEY" || f.Aliases["Check the fuel surcharge"] != "Rate check" {
		t.Fatalf("%+v", f)
	}
	// Marshal then Parse gives the same file.
	data, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse("again.yaml", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if g.Workspaces["vantrow-bills"] != f.Workspaces["vantrow-bills"] || g.Timeout != f.Timeout {
		t.Fatalf("round trip: %+v", g)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown field", "workspaces:\n  a:\n    server: http://x\n    key: k\n    kee: k\n", []string{"gw.yaml: line 5: field kee not found"}},
		{"unknown top-level", "workspace:\n  a:\n    server: http://x\n", []string{"gw.yaml: line 1: field workspace not found"}},
		{"no workspaces", "aliases: {}\n", []string{"line 1: no workspaces"}},
		{"no key", "workspaces:\n  a:\n    server: http://x\n", []string{"line 2: workspace a: give key"}},
		{"both keys", "workspaces:\n  a:\n    server: http://x\n    key: k\n    key_env: K\n", []string{"line 2: workspace a: give key or key_env, not both"}},
		{"bad server", "workspaces:\n  a:\n    server: ftp://x\n    key: k\n", []string{"line 3: workspace a: server \"ftp://x\" is not an http(s) URL"}},
		{"no server", "workspaces:\n  a:\n    key: k\n", []string{"line 2: workspace a: server is required"}},
		{"duplicate", "workspaces:\n  a:\n    server: http://x\n    key: k\n  a:\n    server: http://y\n    key: k\n", []string{"line 5", "already defined"}},
		{"bad timeout", "timeout: soon\nworkspaces:\n  a:\n    server: http://x\n    key: k\n", []string{"line 1: timeout \"soon\""}},
		{"empty alias", "workspaces:\n  a:\n    server: http://x\n    key: k\naliases:\n  Fuel: \"\"\n", []string{"line 6: alias \"Fuel\""}},
		{"empty", "", []string{"the file is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("gw.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

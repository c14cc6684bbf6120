package mcp_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"
)

// transcriptDir holds one folder per golden transcript, one txtar file per
// exchange, as go-sdk keeps its conformance tests: the request and its answer
// side by side, so a reviewer reads a change to an answer next to what asked.
const transcriptDir = "testdata/transcripts"

// exchangeArchive renders one exchange as a txtar archive. The comment is the
// exchange's name; "request" holds the key it was sent with (a seed key's
// label, or a literal token), the headers that matter and the body; "answer"
// holds the status, the WWW-Authenticate challenge when there is one and the
// normalized body.
func exchangeArchive(ex exchange) *txtar.Archive {
	var req bytes.Buffer
	req.WriteString("POST /mcp\n")
	if ex.Key != "" {
		fmt.Fprintf(&req, "Key: %s\n", ex.Key)
	}
	for _, k := range slices.Sorted(maps.Keys(ex.Headers)) {
		fmt.Fprintf(&req, "%s: %s\n", k, ex.Headers[k])
	}
	req.WriteString("\n")
	// Indent keeps the body's bytes (duplicate keys, escapes) as they were
	// sent; re-encoding it would hide exactly what those cases test.
	if err := json.Indent(&req, ex.Request, "", "  "); err != nil {
		req.Write(ex.Request)
	}
	var ans bytes.Buffer
	fmt.Fprintf(&ans, "Status: %d\n", ex.Status)
	if ex.WWWAuth != "" {
		fmt.Fprintf(&ans, "WWW-Authenticate: %s\n", ex.WWWAuth)
	}
	ans.WriteString("\n")
	ans.Write(ex.Response)
	return &txtar.Archive{
		Comment: []byte(ex.Name + "\n"),
		Files: []txtar.File{
			{Name: "request", Data: withNewline(req.Bytes())},
			{Name: "answer", Data: withNewline(ans.Bytes())},
		},
	}
}

func withNewline(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	return b
}

var slugRE = regexp.MustCompile(`[^a-z0-9]+`)

// exchangeFile names an exchange's file: its place in the transcript, so the
// folder lists in replay order, and a slug of its name.
func exchangeFile(i int, name string) string {
	s := strings.Trim(slugRE.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if len(s) > 60 {
		s = s[:60]
		if j := strings.LastIndexByte(s, '-'); j > 0 {
			s = s[:j]
		}
	}
	return fmt.Sprintf("%03d-%s.txtar", i+1, s)
}

// checkTranscript compares the exchanges with testdata/transcripts/<name>/.
// With -update it rewrites the folder instead, removing files no exchange
// wrote, so a renamed or dropped exchange leaves nothing stale behind.
func checkTranscript(t *testing.T, name string, got []exchange) {
	t.Helper()
	dir := filepath.Join(transcriptDir, name)
	want := map[string]*txtar.Archive{}
	for i, ex := range got {
		want[exchangeFile(i, ex.Name)] = exchangeArchive(ex)
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range old {
			if want[filepath.Base(p)] == nil {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		for f, a := range want {
			if err := os.WriteFile(filepath.Join(dir, f), txtar.Format(a), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for _, p := range old {
		if want[filepath.Base(p)] == nil {
			t.Errorf("%s: no exchange writes this file; run go test ./mcp -update if intended", p)
		}
	}
	for _, f := range slices.Sorted(maps.Keys(want)) {
		p := filepath.Join(dir, f)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%v (run go test ./mcp -update to create it)", err)
			continue
		}
		// Byte for byte: the file must be exactly what -update writes.
		if diff := cmp.Diff(string(data), string(txtar.Format(want[f]))); diff != "" {
			t.Errorf("%s changed (-want +got); run go test ./mcp -update if intended:\n%s", p, diff)
		}
	}
}

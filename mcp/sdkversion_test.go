package mcp_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const sdkModule = "github.com/modelcontextprotocol/go-sdk"

// pinnedSDKVersion is the go-sdk version whose wire behaviour the MCP
// server's fast path (mcp/fastpath.go), the upstream client's direct path
// (upstream/direct.go) and the wire they share (internal/mcpwire) were last
// checked against by sdkDifferentials. Change it only after re-running them
// against the new version.
const pinnedSDKVersion = "v1.8.0"

// The sides of the wire a differential test checks.
const (
	serverSide = "server fast path (mcp/fastpath.go)"
	clientSide = "client direct path (upstream/direct.go)"
	sharedWire = "shared wire (internal/mcpwire)"
)

// sides are the sides in the order the failure message lists them.
var sides = []string{serverSide, clientSide, sharedWire}

// sdkDifferentials are the tests and fuzz targets that compare ladder's
// hand-written copies of go-sdk's wire behaviour with go-sdk itself, by
// the side of the wire they check.
var sdkDifferentials = []struct {
	side, dir, file, name, run string
}{
	{serverSide, "mcp", "fastpath_test.go", "TestFastPathMatchesSDK", "go test -count=1 -run TestFastPathMatchesSDK ./mcp"},
	{serverSide, "mcp", "fastpath_test.go", "TestFastPathLeavesTheRestToTheSDK", "go test -count=1 -run TestFastPathLeavesTheRestToTheSDK ./mcp"},
	{serverSide, "mcp", "rpcid_test.go", "TestRequestIDComesBackExactly", "go test -count=1 -run TestRequestIDComesBackExactly ./mcp"},
	{serverSide, "mcp", "rpcid_test.go", "TestUnfaithfulIDsRefused", "go test -count=1 -run TestUnfaithfulIDsRefused ./mcp"},
	{serverSide, "mcp", "fastpath_test.go", "FuzzFastPathMatchesSDK", "go test -run '^$' -fuzz FuzzFastPathMatchesSDK -fuzztime 10m ./mcp"},
	{serverSide, "mcp", "fuzz_internal_test.go", "FuzzParseEnvelope", "go test -run '^$' -fuzz FuzzParseEnvelope -fuzztime 5m ./mcp"},
	{clientSide, "upstream", "upstream_test.go", "TestDirectCallMatchesSDK", "go test -count=1 -run TestDirectCallMatchesSDK ./upstream"},
	{clientSide, "upstream", "upstream_test.go", "TestSessionSpeaksTheOlderProtocol", "go test -count=1 -run TestSessionSpeaksTheOlderProtocol ./upstream"},
	{clientSide, "upstream", "upstream_test.go", "TestSessionFallsBackToTheNewestProtocol", "go test -count=1 -run TestSessionFallsBackToTheNewestProtocol ./upstream"},
	{sharedWire, "internal/mcpwire", "wire_test.go", "TestEventFramingMatchesSDK", "go test -count=1 -run TestEventFramingMatchesSDK ./internal/mcpwire"},
	{sharedWire, "internal/mcpwire", "wire_test.go", "TestPlainProtocol", "go test -count=1 -run TestPlainProtocol ./internal/mcpwire"},
	{sharedWire, "internal/mcpwire", "wire_test.go", "TestClientCallIsPlain", "go test -count=1 -run TestClientCallIsPlain ./internal/mcpwire"},
	{sharedWire, "internal/mcpwire", "frame_test.go", "TestMarshalResultMatchesSDK", "go test -count=1 -run TestMarshalResultMatchesSDK ./internal/mcpwire"},
	{sharedWire, "internal/mcpwire", "frame_test.go", "FuzzFrameResult", "go test -run '^$' -fuzz FuzzFrameResult -fuzztime 5m ./internal/mcpwire"},
}

// TestSDKVersionIsPinned fails when the module builds with a go-sdk other
// than the one the fast path, the direct path and their shared wire were
// checked against: a new go-sdk may change the wire those paths copy, and
// only the differential tests would notice, if someone ran them.
func TestSDKVersionIsPinned(t *testing.T) {
	if got := sdkVersion(t); got != pinnedSDKVersion {
		t.Fatal(sdkChanged(got))
	}
}

// sdkChanged is TestSDKVersionIsPinned's failure message for go-sdk
// version got: what changed, and the commands to re-run, side by side.
func sdkChanged(got string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "go.mod builds with %s %s, but ladder's copies of its wire were checked against %s.\n"+
		"Re-run the differential tests and fuzz targets of both paths, fix any difference, then set pinnedSDKVersion in mcp/sdkversion_test.go to %s:",
		sdkModule, got, pinnedSDKVersion, got)
	for _, side := range sides {
		b.WriteString("\n  " + side + ":")
		for _, d := range sdkDifferentials {
			if d.side == side {
				b.WriteString("\n\t" + d.run)
			}
		}
	}
	return b.String()
}

// TestSDKChangedNamesBothSides: the failure message names every
// differential test under its side, and the server's and the client's
// sides each have some.
func TestSDKChangedNamesBothSides(t *testing.T) {
	msg := sdkChanged("v9.9.9")
	for _, want := range []string{"v9.9.9", pinnedSDKVersion, "to v9.9.9:"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message does not say %q:\n%s", want, msg)
		}
	}
	for _, side := range sides {
		start := strings.Index(msg, "\n  "+side+":")
		if start < 0 {
			t.Errorf("the message names no %s:\n%s", side, msg)
			continue
		}
		part := msg[start+len(side)+4:]
		if end := strings.Index(part, "\n  "); end >= 0 {
			part = part[:end]
		}
		n := 0
		for _, d := range sdkDifferentials {
			if d.side == side {
				n++
				if !strings.Contains(part, "\n\t"+d.run) {
					t.Errorf("the message does not list %s under %s:\n%s", d.name, side, msg)
				}
			}
		}
		if n == 0 {
			t.Errorf("no differential test checks the %s", side)
		}
	}
}

// sdkVersion returns the go-sdk version the module builds with. A test
// binary's build info lists no dependencies, so it reads go.mod, whose
// require line is the selected version (the module graph is pruned: go.mod
// names every module that provides a package).
func sdkVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	v := sdkVersionIn(string(data))
	if v == "" {
		t.Fatalf("go.mod does not require %s", sdkModule)
	}
	return v
}

// sdkVersionIn finds go-sdk's version in a go.mod: the require line's, or
// a replacement's, which wins; a replacement by a directory has no version
// and is named by its path, so it never matches the pin.
func sdkVersionIn(gomod string) string {
	required, replaced := "", ""
	for line := range strings.Lines(gomod) {
		line, _, _ = strings.Cut(line, "//")
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "require" || f[0] == "replace") {
			f = f[1:]
		}
		if len(f) < 2 || f[0] != sdkModule {
			continue
		}
		if i := slices.Index(f, "=>"); i >= 0 {
			switch rest := f[i+1:]; len(rest) {
			case 1:
				replaced = "directory " + rest[0]
			case 2:
				replaced = rest[1]
			}
			continue
		}
		required = f[1]
	}
	if replaced != "" {
		return replaced
	}
	return required
}

// TestSDKVersionIn reads the version from each shape of go.mod line.
func TestSDKVersionIn(t *testing.T) {
	for _, tc := range []struct{ name, gomod, want string }{
		{"require line", "module m\n\nrequire " + sdkModule + " v1.8.0\n", "v1.8.0"},
		{"require block", "require (\n\tx.org/y v0.1.0\n\t" + sdkModule + " v1.9.1 // indirect\n)\n", "v1.9.1"},
		{"replaced by a version", "require " + sdkModule + " v1.8.0\nreplace " + sdkModule + " => example.org/fork v1.8.1\n", "v1.8.1"},
		{"replaced by a directory", "require " + sdkModule + " v1.8.0\nreplace (\n\t" + sdkModule + " v1.8.0 => ../go-sdk\n)\n", "directory ../go-sdk"},
		{"another module with the prefix", "require " + sdkModule + "/extra v0.1.0\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sdkVersionIn(tc.gomod); got != tc.want {
				t.Errorf("sdkVersionIn = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSDKDifferentialsExist keeps the list TestSDKVersionIsPinned prints
// true: each named test or fuzz target is declared where it says, under a
// side the message lists, and every test or fuzz target named
// …MatchesSDK in the packages that copy go-sdk's wire is on the list.
func TestSDKDifferentialsExist(t *testing.T) {
	listed := map[string]bool{}
	for _, d := range sdkDifferentials {
		listed[d.name] = true
		t.Run(d.name, func(t *testing.T) {
			if !slices.Contains(sides, d.side) {
				t.Errorf("side %q is not one the message lists", d.side)
			}
			src, err := os.ReadFile(filepath.Join("..", d.dir, d.file))
			if err != nil {
				t.Fatal(err)
			}
			decl := regexp.MustCompile(`(?m)^func ` + d.name + `\(`)
			if !decl.Match(src) {
				t.Errorf("%s/%s declares no %s", d.dir, d.file, d.name)
			}
			if !strings.Contains(d.run, " "+d.name+" ") || !strings.HasSuffix(d.run, "./"+d.dir) {
				t.Errorf("command %q does not run %s in ./%s", d.run, d.name, d.dir)
			}
		})
	}
	matches := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)\w*MatchesSDK)\(`)
	for _, dir := range []string{"mcp", "upstream", "internal/mcpwire"} {
		files, err := filepath.Glob(filepath.Join("..", dir, "*_test.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no tests in %s: %v", dir, err)
		}
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range matches.FindAllSubmatch(src, -1) {
				if !listed[string(m[1])] {
					t.Errorf("%s declares %s, which sdkDifferentials does not list", f, m[1])
				}
			}
		}
	}
}

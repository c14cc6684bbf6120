package mcp_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const sdkModule = "github.com/modelcontextprotocol/go-sdk"

// pinnedSDKVersion is the go-sdk version whose wire behaviour the MCP fast
// path (mcp/fastpath.go) and the upstream direct path (upstream/direct.go)
// were last checked against by sdkDifferentials. Change it only after
// re-running them against the new version.
const pinnedSDKVersion = "v1.8.0"

// sdkDifferentials are the tests and fuzz targets that compare ladder's
// hand-written copies of go-sdk's wire behaviour with go-sdk itself.
var sdkDifferentials = []struct {
	dir, file, name, run string
}{
	{"mcp", "fastpath_test.go", "TestFastPathMatchesSDK", "go test -count=1 -run TestFastPathMatchesSDK ./mcp"},
	{"mcp", "fastpath_test.go", "TestFastPathLeavesTheRestToTheSDK", "go test -count=1 -run TestFastPathLeavesTheRestToTheSDK ./mcp"},
	{"mcp", "rpcid_test.go", "TestRequestIDComesBackExactly", "go test -count=1 -run TestRequestIDComesBackExactly ./mcp"},
	{"mcp", "rpcid_test.go", "TestUnfaithfulIDsRefused", "go test -count=1 -run TestUnfaithfulIDsRefused ./mcp"},
	{"upstream", "upstream_test.go", "TestDirectCallMatchesSDK", "go test -count=1 -run TestDirectCallMatchesSDK ./upstream"},
	{"mcp", "fastpath_test.go", "FuzzFastPathMatchesSDK", "go test -run '^$' -fuzz FuzzFastPathMatchesSDK -fuzztime 10m ./mcp"},
	{"mcp", "fuzz_internal_test.go", "FuzzParseEnvelope", "go test -run '^$' -fuzz FuzzParseEnvelope -fuzztime 5m ./mcp"},
}

// TestSDKVersionIsPinned fails when the module builds with a go-sdk other than the
// one the fast path and the direct path were checked against: a new go-sdk
// may change the wire those paths copy, and only the differential tests
// would notice, if someone ran them.
func TestSDKVersionIsPinned(t *testing.T) {
	got := sdkVersion(t)
	if got == pinnedSDKVersion {
		return
	}
	var b strings.Builder
	for _, d := range sdkDifferentials {
		b.WriteString("\n\t" + d.run)
	}
	t.Fatalf("go.mod builds with %s %s, but mcp/fastpath.go and upstream/direct.go were checked against %s.\n"+
		"Re-run the differential tests and fuzz targets, fix any difference, then set pinnedSDKVersion in mcp/sdkversion_test.go to %s:%s",
		sdkModule, got, pinnedSDKVersion, got, b.String())
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
// true: each named test or fuzz target is declared where it says.
func TestSDKDifferentialsExist(t *testing.T) {
	for _, d := range sdkDifferentials {
		t.Run(d.name, func(t *testing.T) {
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
}

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestHelpHasNoSideEffect runs the built binary with -h and --help on every
// command and subcommand, each in an empty working directory: the usage is
// printed, the exit code is 0, and no file appears (no ladder.db created and
// migrated, no docs/reference.md, no demo keys).
func TestHelpHasNoSideEffect(t *testing.T) {
	bin := ladderBinary(t)
	var invocations [][]string
	for _, c := range commands() {
		invocations = append(invocations, []string{c.name})
	}
	invocations = append(invocations, [][]string{
		{"keys", "create"}, {"keys", "list"}, {"keys", "revoke"},
		{"approvals", "list"}, {"approvals", "approve"}, {"approvals", "reject"}, {"approvals", "retry"},
		{"gate", "functions"}, {"gate", "authorize"}, {"gate", "history"},
		{"audit", "list"}, {"audit", "verify"}, {"audit", "export"},
	}...)
	for _, inv := range invocations {
		for _, help := range []string{"-h", "--help"} {
			args := append(append([]string{}, inv...), help)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				cmd := exec.Command(bin, args...)
				cmd.Dir = dir
				cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				if err := cmd.Run(); err != nil {
					t.Fatalf("ladder %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out.String(), errb.String())
				}
				if !strings.Contains(strings.ToLower(out.String()), "usage") {
					t.Errorf("ladder %s printed no usage on stdout:\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), out.String(), errb.String())
				}
				entries, err := os.ReadDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				for _, en := range entries {
					t.Errorf("ladder %s created %s", strings.Join(args, " "), en.Name())
				}
			})
		}
	}
}

// TestBareLadderIsAUsageError: no command prints the usage to stderr and
// exits 2.
func TestBareLadderIsAUsageError(t *testing.T) {
	out, errOut, err := runCLI(t, nil)
	if got := exitCode(err); got != 2 {
		t.Errorf("exit code %d, want 2", got)
	}
	if out != "" || !strings.Contains(errOut, "Usage: ladder COMMAND") {
		t.Errorf("stdout %q, stderr %q; want the usage on stderr only", out, errOut)
	}
	if _, _, err := runCLI(t, nil, "--help"); err != nil {
		t.Errorf("ladder --help: %v", err)
	}
}

// TestReadOnlyCommandsNeverCreateADatabase: keys list and backtest open
// the database read-only, so a missing file is an error naming it, and no
// file is left behind.
func TestReadOnlyCommandsNeverCreateADatabase(t *testing.T) {
	cfg := writeDemoConfig(t)
	for _, args := range [][]string{{"keys", "list"}, {"backtest"}} {
		t.Run(args[0], func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "missing.db")
			_, _, err := runCLI(t, nil, append(args, "--config", cfg, "--db", db)...)
			if exitCode(err) != 3 || !strings.Contains(err.Error(), db) {
				t.Errorf("ladder %s on a missing database: exit %d, %v; want exit 3 naming %s", args[0], exitCode(err), err, db)
			}
			if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("ladder %s created %s (stat: %v)", args[0], db, err)
			}
		})
	}
}

// TestLocalCommandsWarnInOnePlainLine: keys and backtest without
// LADDER_AUDIT_SECRET print the warning once, as a sentence, not as JSON
// log records (nor the store's migration notes).
func TestLocalCommandsWarnInOnePlainLine(t *testing.T) {
	cfg := writeDemoConfig(t)
	db := filepath.Join(t.TempDir(), "ladder.db")
	for _, args := range [][]string{
		{"keys", "create", "--workspace", "vantrow-bills", "--kind", "agent"},
		{"keys", "list"},
		{"backtest"},
	} {
		_, errOut, err := runCLI(t, nil, append(args, "--config", cfg, "--db", db)...)
		if err != nil {
			t.Fatalf("ladder %s: %v\n%s", strings.Join(args, " "), err, errOut)
		}
		want := "ladder: warning: audit sampling secret derived from the config file; set LADDER_AUDIT_SECRET so agents cannot predict which items are audited.\n"
		if errOut != want {
			t.Errorf("ladder %s stderr:\n%s\nwant:\n%s", strings.Join(args, " "), errOut, want)
		}
	}
}

// TestVersionFromBuildInfo: ladder version names the commit and the Go
// version, and -ldflags -X main.version still sets the version.
func TestVersionFromBuildInfo(t *testing.T) {
	out, _, err := runCLI(t, nil, "version")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ladder ", "commit ", "go1."} {
		if !strings.Contains(out, want) {
			t.Errorf("ladder version = %q, lacks %q", out, want)
		}
	}
	bin := filepath.Join(t.TempDir(), "ladder")
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	if b, err := exec.Command("go", "build", "-ldflags", "-X main.version=v9.9.9", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	b, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(b), "ladder v9.9.9 (commit ") {
		t.Errorf("ladder version with -X main.version=v9.9.9: %q %v", b, err)
	}
}

// TestVersionLine: the module version, the commit (marked when the work
// tree was modified) and the Go version come from the build information;
// a version set with -ldflags wins over the module's.
func TestVersionLine(t *testing.T) {
	settings := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.modified", Value: "true"}}
	for _, tt := range []struct {
		name, v string
		bi      *debug.BuildInfo
		want    string
	}{
		{"go install of a tagged module", "dev", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}}, "ladder v1.2.3 (commit unknown, go1.26.8)"},
		{"go build in a changed checkout", "dev", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: settings}, "ladder dev (commit 0123456789abcdef0123456789abcdef01234567+modified, go1.26.8)"},
		{"-ldflags -X main.version", "v9.9.9", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: settings[:1]}, "ladder v9.9.9 (commit 0123456789abcdef0123456789abcdef01234567, go1.26.8)"},
		{"no build information", "dev", nil, "ladder dev (commit unknown, unknown)"},
	} {
		if diff := cmp.Diff(tt.want, versionLine(tt.v, tt.bi)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

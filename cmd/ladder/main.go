// Command ladder is the ladder server and its command-line tool: serve the
// REST, MCP and console surfaces, run the demo, manage keys, verify the
// audit log, and talk to a running server.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(os.Stderr, ee.msg)
			}
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "ladder:", err)
		os.Exit(3)
	}
}

// exitError ends the program with a given exit code (the gate CLI's
// PASS 0 / ESCALATE 1 / BYPASS_TO_HUMAN 2 / error 3 convention, or 1 for a
// failed audit verification).
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return fmt.Sprintf("exit %d: %s", e.code, e.msg) }

// env carries what every command gets from the outside world, so commands
// are testable without touching the process's globals.
type env struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e env, args []string) error
}

func commands() []command {
	return []command{
		{"serve", "serve the REST API, /mcp and the console", cmdServe},
		{"demo", "run a server on the embedded demo config with 14 weeks of history", cmdDemo},
		{"mcp", "bridge MCP over stdio to a server (mcp --stdio --server URL --key KEY)", cmdMCP},
		{"steps", "list which steps run alone (against a server)", cmdSteps},
		{"evidence", "show a step's evidence pack: evidence STEP", cmdEvidence},
		{"route", "ask for a decision: route STEP ITEM", cmdRoute},
		{"review", "record a verdict: review ROUTE_ID --agree|--disagree", cmdReview},
		{"backtest", "replay recorded reviews under other rules (backtest --rules FILE --since 12w)", cmdBacktest},
		{"approvals", "list, approve, reject or retry approval requests (against a server)", cmdApprovals},
		{"webhooks", "list event deliveries or send one again (webhooks list|redeliver, against a server)", cmdWebhooks},
		{"keys", "create, list or revoke keys (keys create|list|revoke)", cmdKeys},
		{"gate", "evidence gate: gate functions|authorize|history (authorize exits PASS 0, ESCALATE 1, BYPASS_TO_HUMAN 2, error 3)", cmdGate},
		{"ask", "ask the autonomy ladder about a step across workspaces: ask STEP --gateway FILE", cmdAsk},
		{"gateway", "serve ask_autonomy_ladder over stdio (gateway --stdio --gateway FILE)", cmdGateway},
		{"import", "import past reviews, audits and outcomes from JSON lines or CSV: import --db PATH FILE", cmdImport},
		{"audit", "list, verify or export the audit log, from a server or a database (audit list|verify|export)", cmdAudit},
		{"reference", "write docs/reference.md from the code and the demo config", cmdReference},
		{"version", "print the version, the commit it was built from and the Go version", cmdVersion},
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	e := env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		// No command is a mistake, not a request for help: usage goes to
		// stderr and the exit code is 2, as flag's for a bad flag.
		usage(stderr)
		return exitError{code: 2}
	}
	if isHelp(args[0]) || args[0] == "help" {
		usage(stdout)
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, e, args[1:])
		}
	}
	usage(stderr)
	return exitError{code: 3, msg: fmt.Sprintf("ladder: unknown command %q", args[0])}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: ladder COMMAND [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'ladder COMMAND -h' for a command's flags.")
}

// isHelp reports whether arg asks for usage.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}

// parseFlags parses args into fs. Asking for help (-h, --help) prints the
// usage to stdout and ends the command with exit 0 before it does anything,
// so a command never opens a database or writes a file for -h; a bad flag
// prints the error and the usage to stderr and exits 3.
func parseFlags(e env, fs *flag.FlagSet, args []string) error {
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(e.stderr)
	if errors.Is(err, flag.ErrHelp) {
		e.stdout.Write(buf.Bytes())
		return exitError{code: 0}
	}
	e.stderr.Write(buf.Bytes())
	if err != nil {
		return exitError{code: 3}
	}
	return nil
}

// subcommandHelp answers -h or --help given in place of a subcommand
// (ladder keys -h): the usage on stdout, exit 0.
func subcommandHelp(e env, args []string, usage string) (bool, error) {
	if len(args) > 0 && (isHelp(args[0]) || args[0] == "help") {
		fmt.Fprintln(e.stdout, usage)
		return true, exitError{code: 0}
	}
	return false, nil
}

// subcommandFlags starts a command with subcommands (ladder keys create,
// ladder approvals list, …): no subcommand is a usage error, a help word
// prints usage, and otherwise it returns the subcommand's flag set, named
// "CMD SUB" and reporting to stderr.
func subcommandFlags(e env, cmd string, args []string, usage string) (*flag.FlagSet, error) {
	if len(args) == 0 {
		return nil, exitError{code: 3, msg: usage}
	}
	if ok, err := subcommandHelp(e, args, usage); ok {
		return nil, err
	}
	fs := flag.NewFlagSet(cmd+" "+args[0], flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return fs, nil
}

// cmdVersion prints the version set with -ldflags "-X main.version=…" or,
// without it, the module version the binary was built as, then the commit
// (marked +modified for a build from a changed work tree) and the Go version,
// all from the build information.
func cmdVersion(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintln(e.stdout, versionLine(version, bi))
	return nil
}

// versionLine is what ladder version prints, in one line: v (main.version)
// unless it is the default "dev" and the build names a module version, then
// the build's commit and Go version (bi may be nil).
func versionLine(v string, bi *debug.BuildInfo) string {
	commit, goVersion := "unknown", "unknown"
	if bi != nil {
		goVersion = bi.GoVersion
		if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			commit = rev
			if modified == "true" {
				commit += "+modified"
			}
		}
	}
	return fmt.Sprintf("ladder %s (commit %s, %s)", v, commit, goVersion)
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/gateway"
)

// cmdGateway serves the Gateway's one MCP tool, ask_autonomy_ladder, over
// stdio: ladder gateway --stdio --gateway FILE.
func cmdGateway(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	stdio := fs.Bool("stdio", false, "speak MCP over stdin/stdout (required)")
	file := fs.String("gateway", envOr(e, "LADDER_GATEWAY", ""), "gateway file: workspaces with server and key, and aliases (or LADDER_GATEWAY)")
	timeout := fs.Duration("timeout", 0, "per-workspace timeout (default: the file's, else 10s)")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	if !*stdio {
		return exitError{code: 3, msg: "ladder gateway: only --stdio is supported: ladder gateway --stdio --gateway FILE"}
	}
	if *file == "" {
		return exitError{code: 3, msg: "ladder gateway: --gateway FILE (or LADDER_GATEWAY) is required"}
	}
	g, err := loadGateway(*file, e, *timeout)
	if err != nil {
		return err
	}
	srv := gateway.NewServer(g, version, newLogger(e.stderr))
	var t sdk.Transport = &sdk.StdioTransport{}
	if e.stdin != os.Stdin || e.stdout != os.Stdout {
		// In tests: the injected streams.
		t = &sdk.IOTransport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}}
	}
	if err := srv.Run(ctx, t); err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// demoAliases are seed 000's stand-in names and the live names they stand
// for.
var demoAliases = map[string]string{
	"Check the fuel surcharge": "Rate check",
	"Log location and ETA":     "Capture the ETA",
}

// writeDemoGateway writes a gateway file for a running demo: every
// workspace with queues, its agent key, and seed 000's aliases.
func writeDemoGateway(path, url string, cfg *config.Config, keys demoKeys) error {
	f := &gateway.File{Workspaces: map[string]gateway.Workspace{}, Aliases: demoAliases}
	for _, w := range cfg.Workspaces {
		if len(w.Queues) == 0 || keys.Workspaces[w.ID]["agent"] == "" {
			continue
		}
		f.Workspaces[w.ID] = gateway.Workspace{Server: url, Key: keys.Workspaces[w.ID]["agent"]}
	}
	data, err := f.Marshal()
	if err != nil {
		return fmt.Errorf("encode gateway file: %w", err)
	}
	head := "# ladder gateway file, written by `ladder demo` for " + url + ".\n" +
		"# Try: ladder ask \"Check the fuel surcharge\" --gateway " + path + "\n" +
		"# Keys may also come from the environment: key_env: VARIABLE_NAME.\n"
	if err := os.WriteFile(path, append([]byte(head), data...), 0o600); err != nil {
		return fmt.Errorf("write gateway file: %w", err)
	}
	return nil
}

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/service"
	"github.com/ladderhq/ladder/translog"
)

// localFlags are the flags of commands that work on a config and a database
// directly, without a server.
type localFlags struct {
	config *string
	db     *string
}

func addLocalFlags(fs *flag.FlagSet) localFlags {
	return localFlags{
		config: fs.String("config", "ladder.yaml", "config file"),
		db:     fs.String("db", "ladder.db", "SQLite file path, or a postgres:// URL"),
	}
}

// open loads the config and opens the database, creating and migrating it
// as needed (keys create, keys revoke).
func (l localFlags) open(ctx context.Context, e env) (*stack, error) {
	return l.openWith(ctx, e, false)
}

// openReadOnly loads the config and opens an existing database read-only
// (keys list, backtest): a missing file is an error naming it, never an
// empty database created by accident.
func (l localFlags) openReadOnly(ctx context.Context, e env) (*stack, error) {
	return l.openWith(ctx, e, true)
}

func (l localFlags) openWith(ctx context.Context, e env, readOnly bool) (*stack, error) {
	cfg, err := config.Load(*l.config)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	// A person reads this command's output: warnings are plain lines, and
	// the store's routine notes (migrations applied) stay out of it.
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return openStackWith(ctx, cfg, *l.db, e.getenv, log, stackOptions{readOnly: readOnly, warn: func(msg string) {
		fmt.Fprintln(e.stderr, "ladder: warning: "+msg+".")
	}})
}

func cmdKeys(ctx context.Context, e env, args []string) error {
	const usage = "usage: ladder keys create|list|revoke|checkpoint-key [flags]\n\nRun 'ladder keys SUBCOMMAND -h' for a subcommand's flags."
	if len(args) > 0 && args[0] == "checkpoint-key" {
		return cmdCheckpointKey(e, args[1:])
	}
	fs, err := subcommandFlags(e, "keys", args, usage)
	if err != nil {
		return err
	}
	lf := addLocalFlags(fs)
	switch args[0] {
	case "create":
		ws := fs.String("workspace", "", "workspace of the key (\"*\" for an admin key of every workspace)")
		kind := fs.String("kind", "", "agent, human or admin")
		name := fs.String("name", "", "a name to recognise the key by")
		expires := fs.Duration("expires", 0, "expire the key after this long (e.g. 720h); 0 never expires")
		asJSON := fs.Bool("json", false, "print the key as JSON")
		if err := parseFlags(e, fs, args[1:]); err != nil {
			return err
		}
		if *ws == "" || *kind == "" {
			return exitError{code: 3, msg: "ladder keys create: --workspace and --kind are required (--kind agent|human|admin)"}
		}
		st, err := lf.open(ctx, e)
		if err != nil {
			return err
		}
		defer st.Close()
		k, token, err := st.svc.CreateKey(ctx, "cli", ladder.KeyRequest{Workspace: *ws, Kind: ladder.KeyKind(*kind), Name: *name, ExpiresIn: *expires})
		if err != nil {
			return refusal(err)
		}
		if *asJSON {
			return json.NewEncoder(e.stdout).Encode(map[string]any{"id": k.ID, "workspace": k.Workspace, "kind": k.Kind, "name": k.Name, "expires_at": k.ExpiresAt, "token": token})
		}
		fmt.Fprintf(e.stdout, "Created %s key %s for %s. It is shown once; store it now:\n\n  %s\n", k.Kind, k.ID, k.Workspace, token)
		return nil
	case "list":
		ws := fs.String("workspace", "", "only this workspace's keys")
		if err := parseFlags(e, fs, args[1:]); err != nil {
			return err
		}
		st, err := lf.openReadOnly(ctx, e)
		if err != nil {
			return err
		}
		defer st.Close()
		keys, err := st.svc.ListKeys(ctx, *ws)
		if err != nil {
			return refusal(err)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tWORKSPACE\tKIND\tNAME\tCREATED\tSTATE")
		now := time.Now()
		for _, k := range keys {
			state := "active"
			switch {
			case k.RevokedAt != nil:
				state = "revoked " + k.RevokedAt.Format(time.RFC3339)
			case k.ExpiresAt != nil && !k.Active(now):
				state = "expired " + k.ExpiresAt.Format(time.RFC3339)
			case k.ExpiresAt != nil:
				state = "expires " + k.ExpiresAt.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Workspace, k.Kind, k.Name, k.CreatedAt.Format(time.RFC3339), state)
		}
		return tw.Flush()
	case "revoke":
		if err := parseFlags(e, fs, args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return exitError{code: 3, msg: "usage: ladder keys revoke [--config F --db D] ID"}
		}
		st, err := lf.open(ctx, e)
		if err != nil {
			return err
		}
		defer st.Close()
		k, err := st.svc.RevokeKey(ctx, "cli", service.AllWorkspaces, fs.Arg(0))
		if err != nil {
			return refusal(err)
		}
		fmt.Fprintf(e.stdout, "Revoked key %s (%s, %s).\n", k.ID, k.Kind, k.Workspace)
		return nil
	}
	return exitError{code: 3, msg: fmt.Sprintf("ladder keys: unknown subcommand %q; use create, list, revoke or checkpoint-key", args[0])}
}

// refusal prints a refusal the way every CLI command does: its name, its
// message and its hint.
func refusal(err error) error {
	e := ladder.AsError(err).Render(ladder.SurfaceCLI)
	msg := fmt.Sprintf("%s: %s", e.Code, cliHint(e.Message))
	if e.Hint != "" {
		msg += "\nhint: " + cliHint(e.Hint)
	}
	if (e.Code == ladder.CodeInternal || e.Code == ladder.CodeServerUnreachable) && e.Err != nil {
		msg += "\ncause: " + e.Err.Error()
	}
	return exitError{code: 3, msg: msg}
}

// cliTerms rewrites what a refusal names on another surface into the
// CLI's commands and flags. A server renders its refusals for the CLI when
// the client says so (client.Client.Surface); what reaches the CLI through
// MCP (ask, the gateway) names tools, and the names come from the same
// table (ladder.OpName). Only names that cannot be ordinary words are
// rewritten, longest first so a phrase wins over its parts.
func cliTerms() *strings.Replacer {
	var pairs [][2]string
	for _, op := range ladder.OpTokens() {
		cli := ladder.OpName(op, "", ladder.SurfaceCLI)
		for _, s := range []ladder.Surface{ladder.SurfaceMCP, ladder.SurfaceREST} {
			name := ladder.OpName(op, "", s)
			if name != cli && strings.ContainsAny(name, "_/") && !strings.Contains(name, "{") {
				pairs = append(pairs, [2]string{name, cli})
			}
		}
	}
	slices.SortStableFunc(pairs, func(a, b [2]string) int { return len(b[0]) - len(a[0]) })
	var args []string
	for _, p := range pairs {
		args = append(args, p[0], p[1])
	}
	return strings.NewReplacer(args...)
}

// cliHint is a refusal's hint or message in the CLI's terms.
func cliHint(hint string) string {
	return cliTerms().Replace(hint)
}

// cmdCheckpointKey generates an audit checkpoint key pair and prints both
// halves: the private half for the server (LADDER_CHECKPOINT_KEY), the
// public half for everyone who verifies (witnesses, offline verifiers).
func cmdCheckpointKey(e env, args []string) error {
	fs := flag.NewFlagSet("keys checkpoint-key", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	name := fs.String("name", "ladder", "the server's name in the key and in every checkpoint's origin line (letters, digits, . - _; e.g. ladder.example.com)")
	asJSON := fs.Bool("json", false, "print the pair as JSON")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	skey, vkey, err := translog.GenerateKey(*name)
	if err != nil {
		return exitError{code: 3, msg: fmt.Sprintf("ladder keys checkpoint-key: %v (--name takes letters, digits and . - _)", err)}
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(map[string]string{"private": skey, "public": vkey})
	}
	fmt.Fprintf(e.stdout, "Audit checkpoint key %q.\n\nPrivate half: give it to every ladder serve replica as LADDER_CHECKPOINT_KEY; keep it secret.\n\n  %s\n\nPublic half: publish it; witnesses and ladder audit verify-export --key check checkpoints with it.\n\n  %s\n", *name, skey, vkey)
	return nil
}

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/ladderhq/ladder"
)

func cmdAudit(ctx context.Context, e env, args []string) error {
	if len(args) == 0 {
		return exitError{code: 3, msg: "usage: ladder audit verify|export --db PATH"}
	}
	fs := flag.NewFlagSet("audit "+args[0], flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	db := fs.String("db", "ladder.db", "SQLite file path, or a postgres:// URL")
	ws := fs.String("workspace", "", "export: only this workspace's records")
	if err := fs.Parse(args[1:]); err != nil {
		return exitError{code: 3}
	}
	st, err := openStore(ctx, *db, e.getenv, newLogger(e.stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	switch args[0] {
	case "verify":
		var v ladder.ChainVerifier
		err := st.WalkAudit(ctx, 0, func(r ladder.AuditRecord) error {
			if err := v.Check(r); err != nil {
				return err
			}
			if v.Count()%100000 == 0 {
				fmt.Fprintf(e.stderr, "verified %d records…\n", v.Count())
			}
			return nil
		})
		if err != nil {
			return exitError{code: 1, msg: fmt.Sprintf("audit chain BROKEN after %d good records: %v", v.Count(), err)}
		}
		fmt.Fprintf(e.stdout, "audit chain intact: %d records verified, last hash %s\n", v.Count(), v.LastHash())
		return nil
	case "export":
		enc := json.NewEncoder(e.stdout)
		enc.SetEscapeHTML(false)
		return st.WalkAudit(ctx, 0, func(r ladder.AuditRecord) error {
			if *ws != "" && r.Workspace != *ws {
				return nil
			}
			return enc.Encode(r)
		})
	}
	return exitError{code: 3, msg: fmt.Sprintf("ladder audit: unknown subcommand %q; use verify or export", args[0])}
}

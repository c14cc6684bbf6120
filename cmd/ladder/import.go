package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ladderhq/ladder"
)

const importUsage = `usage: ladder import [--config FILE] [--db PATH|postgres://…] [--workspace ID] [--format jsonl|csv] FILE
       ladder import --server URL --key ADMIN_KEY [--workspace ID] [--format jsonl|csv] FILE

Loads past reviews, audits and outcomes with their timestamps (JSON lines or
CSV with a header row; see README "Importing history") into a database, or
through a server (POST /v1/import, an admin key), in one audited
transaction. The rows are replayed in time order through the same rules as
live reviews. Prints one line per step, or the bad rows with their line
numbers (exit 3; nothing is imported). A key selects the server unless
--db is given.`

// cmdImport imports a file of past records into a local database.
func cmdImport(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprintln(fs.Output(), importUsage); fs.PrintDefaults() }
	lf := addLocalFlags(fs)
	rf := addRemoteFlags(fs, e)
	ws := fs.String("workspace", "", "the workspace the rows belong to (default: the config's only workspace, or the key's)")
	format := fs.String("format", "", "jsonl or csv (default: from the file's extension, .csv for CSV)")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	// Flags may follow the file too: ladder import FILE --format csv.
	rest := fs.Args()
	if len(rest) > 0 {
		if err := parseFlags(e, fs, rest[1:]); err != nil {
			return err
		}
		rest = append(rest[:1], fs.Args()...)
	}
	if len(rest) != 1 {
		return exitError{code: 3, msg: importUsage}
	}
	path := rest[0]
	data, err := os.ReadFile(path)
	if err != nil {
		return exitError{code: 3, msg: fmt.Sprintf("ladder import: %v", err)}
	}
	if *format == "" {
		*format = ladder.ImportFormatOf(path)
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if !set["db"] && *rf.key != "" {
		c, err := rf.client()
		if err != nil {
			return err
		}
		res, err := c.Import(ctx, *ws, *format, data)
		if err != nil {
			printBadRows(e.stderr, path, err)
			return refusal(err)
		}
		if *rf.json {
			return printJSON(e.stdout, res)
		}
		printImport(e.stdout, res)
		return nil
	}
	st, err := lf.open(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	if *ws == "" {
		ids := st.svc.WorkspaceIDs()
		if len(ids) != 1 {
			return exitError{code: 3, msg: "ladder import: the config has several workspaces; say which with --workspace (one of: " + strings.Join(ids, ", ") + ")"}
		}
		*ws = ids[0]
	}
	res, err := st.svc.Import(ctx, ladder.Principal{KeyID: "cli", Workspace: *ws, Kind: ladder.KeyAdmin}, ladder.ImportRequest{Workspace: *ws, Format: *format, Data: data})
	if err != nil {
		printBadRows(e.stderr, path, err)
		return refusal(err)
	}
	printImport(e.stdout, res)
	return nil
}

// printBadRows lists an import refusal's bad rows, one per line, as
// FILE:LINE: field: message.
func printBadRows(w io.Writer, path string, err error) {
	le := ladder.AsError(err)
	var rows []ladder.ImportRowError
	switch rs := le.Data["rows"].(type) {
	case []ladder.ImportRowError: // refused here
		rows = rs
	case []any: // refused by a server, as JSON
		data, _ := json.Marshal(rs)
		_ = json.Unmarshal(data, &rows)
	}
	for _, r := range rows {
		field := ""
		if r.Field != "" {
			field = r.Field + ": "
		}
		fmt.Fprintf(w, "%s:%d: %s%s\n", path, r.Line, field, r.Message)
	}
}

// printImport prints an import's summary, one line per step.
func printImport(w io.Writer, res ladder.ImportResult) {
	fmt.Fprintf(w, "Imported %d rows into %s (sha256 %s).\n", res.Rows, res.Workspace, res.SHA256[:12])
	for _, s := range res.Steps {
		moves := "no lane changes"
		if len(s.LaneChanges) > 0 {
			var m []string
			for _, c := range s.LaneChanges {
				m = append(m, fmt.Sprintf("%s→%s on %s", c.From, c.To, c.At.UTC().Format("2006-01-02")))
			}
			moves = "lane changes: " + strings.Join(m, ", ")
		}
		fmt.Fprintf(w, "%s/%s: %d reviews, %d audits, %d outcomes; %s; now in %s.\n", s.Queue, s.Step, s.Reviews, s.Audits, s.Outcomes, moves, s.Lane)
	}
}

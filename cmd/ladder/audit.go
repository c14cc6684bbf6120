package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/service"
)

const auditUsage = `usage: ladder audit list|verify|export|verify-export|witness [flags]

  list           the audit trail, newest first, filtered and paged
  verify         walk the hash chain; exit 1 when it is broken
  export         every matching record, oldest first, as JSON lines or CSV;
                 --format log: the workspace's whole log with its signed
                 checkpoint, for verify-export (from a server)
  verify-export  verify a --format log export offline: ladder audit
                 verify-export --key PUBKEY FILE; exit 1 naming what fails
  witness        check the server's latest checkpoint extends the last one
                 seen: --server URL --key KEY --pubkey PUBKEY --state DIR

Against a server (the key's workspace; a human or admin key):
  --server URL --key KEY      (or LADDER_SERVER, LADDER_KEY)
Against a database, opened read-only (every workspace, or --workspace):
  --db PATH                   (a SQLite file or a postgres:// URL)
Without --db, a key (--key or LADDER_KEY) selects the server; with
neither, --db defaults to ladder.db.

Filters (list, export): --kind --actor --step (id or queue/step)
  --since --until (RFC 3339 or YYYY-MM-DD; until's date is included)
Run 'ladder audit SUBCOMMAND -h' for a subcommand's flags.`

// auditFlags are the flags of ladder audit's subcommands.
type auditFlags struct {
	remote                          remoteFlags
	db, workspace                   *string
	kind, actor, step, since, until *string
	limit                           *int
	cursor, format                  *string
}

func cmdAudit(ctx context.Context, e env, args []string) error {
	if len(args) == 0 {
		return exitError{code: 3, msg: auditUsage}
	}
	sub := args[0]
	switch sub {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(e.stdout, auditUsage)
		return nil
	case "list", "verify", "export":
	case "verify-export":
		return cmdVerifyExport(e, args[1:])
	case "witness":
		return cmdWitness(ctx, e, args[1:])
	default:
		return exitError{code: 3, msg: fmt.Sprintf("ladder audit: unknown subcommand %q; use list, verify, export, verify-export or witness", sub)}
	}
	fs := flag.NewFlagSet("audit "+sub, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	f := auditFlags{
		remote:    addRemoteFlags(fs, e),
		db:        fs.String("db", "ladder.db", "read this database read-only instead of a server: a SQLite file or a postgres:// URL"),
		workspace: fs.String("workspace", "", "with --db: only this workspace's records (default: every workspace)"),
	}
	if sub != "verify" {
		f.kind = fs.String("kind", "", "only records of this kind (route, review, approval, lane.change, …)")
		f.actor = fs.String("actor", "", "only records by this actor (a key id, or system)")
		f.step = fs.String("step", "", "only records about this step: an id (post_tms) or queue/step (bills/post_tms)")
		f.since = fs.String("since", "", "only records at or after this time (RFC 3339 or YYYY-MM-DD)")
		f.until = fs.String("until", "", "only records before this time (RFC 3339; a YYYY-MM-DD date is included)")
	}
	switch sub {
	case "list":
		f.limit = fs.Int("limit", 0, "records per page, 1–500 (default 50)")
		f.cursor = fs.String("cursor", "", "continue from a previous page's next cursor")
	case "export":
		f.format = fs.String("format", ladder.AuditFormatJSONL, "jsonl (one record per line, as stored), csv, or log (the workspace's log with its signed checkpoint, from a server; see docs/audit-log.md)")
	}
	// -h asks for the usage: it goes to stdout and is no failure. After a
	// bad flag it goes to stderr with the error.
	usageOut := e.stderr
	for _, a := range args[1:] {
		if a == "-h" || a == "-help" || a == "--help" {
			usageOut = e.stdout
		}
	}
	fs.Usage = func() {
		fmt.Fprintf(usageOut, "usage: ladder audit %s [flags]\n\n", sub)
		fs.SetOutput(usageOut)
		fs.PrintDefaults()
		fs.SetOutput(e.stderr)
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitError{code: 3}
	}
	if fs.NArg() > 0 {
		return exitError{code: 3, msg: fmt.Sprintf("ladder audit %s: unexpected argument %q", sub, fs.Arg(0))}
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["db"] && (set["server"] || set["key"]) {
		return exitError{code: 3, msg: "ladder audit: use --db (a database) or --server and --key (a server), not both"}
	}
	// A key selects the server unless a database is named.
	local := set["db"] || *f.remote.key == ""
	if !local && set["workspace"] {
		return exitError{code: 3, msg: "ladder audit: --workspace goes with --db; a server answers for the key's workspace"}
	}
	req := f.request()
	if f.format != nil && *f.format == ladder.AuditFormatLog && local {
		return exitError{code: 3, msg: "ladder audit export --format log: the log export comes from a server, which signs its checkpoint; pass --server and a human or admin --key"}
	}

	var a auditAPI
	if local {
		st, err := openStoreReadOnly(ctx, *f.db, e.getenv, newLogger(e.stderr))
		if err != nil {
			return err
		}
		defer st.Close()
		a = localAudit{r: service.AuditReader{Store: st, Progress: func(n int64) {
			fmt.Fprintf(e.stderr, "verified %d records…\n", n)
		}}, workspace: *f.workspace}
	} else {
		c, err := f.remote.client()
		if err != nil {
			return err
		}
		a = c
	}

	switch sub {
	case "list":
		page, err := a.AuditList(ctx, req)
		if err != nil {
			return refusal(err)
		}
		if *f.remote.json {
			return printJSON(e.stdout, page)
		}
		return printAuditPage(e.stdout, page)
	case "verify":
		res, err := a.AuditVerify(ctx)
		if err != nil {
			return refusal(err)
		}
		if *f.remote.json {
			if err := printJSON(e.stdout, res); err != nil {
				return err
			}
		} else if res.Intact {
			fmt.Fprintf(e.stdout, "audit chain intact: %d records verified, last hash %s\n", res.Verified, res.LastHash)
		}
		if !res.Intact {
			return exitError{code: 1, msg: fmt.Sprintf("audit chain BROKEN after %d good records: %s", res.Verified, res.Reason)}
		}
		return nil
	default: // export
		_, err := a.AuditExport(ctx, req, *f.format, e.stdout)
		if err != nil {
			return refusal(err)
		}
		return nil
	}
}

// request is the filters and page the flags ask for.
func (f auditFlags) request() ladder.AuditListRequest {
	var req ladder.AuditListRequest
	for _, p := range []struct {
		flag *string
		out  *string
	}{{f.kind, &req.Kind}, {f.actor, &req.Actor}, {f.step, &req.Step}, {f.since, &req.Since}, {f.until, &req.Until}, {f.cursor, &req.Cursor}} {
		if p.flag != nil {
			*p.out = *p.flag
		}
	}
	if f.limit != nil {
		req.Limit = *f.limit
	}
	return req
}

// auditAPI is what ladder audit asks of a server (client.Client) or of a
// local database (localAudit).
type auditAPI interface {
	AuditList(ctx context.Context, req ladder.AuditListRequest) (ladder.AuditPage, error)
	AuditVerify(ctx context.Context) (ladder.AuditVerifyResult, error)
	AuditExport(ctx context.Context, req ladder.AuditListRequest, format string, w io.Writer) (int64, error)
}

// localAudit answers ladder audit from a database opened read-only.
type localAudit struct {
	r         service.AuditReader
	workspace string // "" for every workspace
}

func (l localAudit) AuditList(ctx context.Context, req ladder.AuditListRequest) (ladder.AuditPage, error) {
	return l.r.List(ctx, l.workspace, req)
}

func (l localAudit) AuditVerify(ctx context.Context) (ladder.AuditVerifyResult, error) {
	return l.r.Verify(ctx)
}

func (l localAudit) AuditExport(ctx context.Context, req ladder.AuditListRequest, format string, w io.Writer) (int64, error) {
	enc, err := ladder.NewAuditEncoder(w, format)
	if err != nil {
		return 0, err
	}
	if err := enc.Begin(); err != nil {
		return 0, err
	}
	var n int64
	err = l.r.Export(ctx, l.workspace, req, func(r ladder.AuditRecord) error {
		n++
		return enc.Encode(r)
	})
	if ferr := enc.Flush(); err == nil {
		err = ferr
	}
	return n, err
}

// printAuditPage prints a page as a table, one record a line, and how to
// get the next page.
func printAuditPage(w io.Writer, page ladder.AuditPage) error {
	if len(page.Records) == 0 {
		fmt.Fprintln(w, "No records match.")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tAT\tWORKSPACE\tKIND\tACTOR\tSUBJECT\tSTEP")
	for _, r := range page.Records {
		step := ""
		if q, s := ladder.AuditStepOf(r.Data); s != "" {
			step = strings.TrimPrefix(q+"/"+s, "/")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.At.Format("2006-01-02T15:04:05Z07:00"), r.Workspace, r.Kind, r.Actor, r.Subject, step)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.NextCursor != "" {
		fmt.Fprintf(w, "\nMore records: ladder audit list --cursor %s (with the same filters)\n", page.NextCursor)
	}
	return nil
}

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/gate"
)

// Exit codes of `ladder gate authorize`, the 4D-CQ CLI convention.
const (
	exitPass          = 0
	exitEscalate      = 1
	exitBypassToHuman = 2
	exitGateError     = 3
)

const gateUsage = `usage: ladder gate functions [--case C]
       ladder gate authorize --case C --fn F --evidence FILE|-
       ladder gate history [--case C] [--fn F] [--action A] [--state S] [--since T] [--until T] [--limit N] [--cursor X] [--all]
authorize exits 0 on PASS, 1 on ESCALATE, 2 on BYPASS_TO_HUMAN, 3 on an error.`

// cmdGate is `ladder gate functions|authorize|history` against a server.
func cmdGate(ctx context.Context, e env, args []string) error {
	if len(args) == 0 {
		return exitError{code: exitGateError, msg: gateUsage}
	}
	if ok, err := subcommandHelp(e, args, gateUsage); ok {
		return err
	}
	switch args[0] {
	case "functions":
		return gateFunctions(ctx, e, args[1:])
	case "authorize":
		return gateAuthorize(ctx, e, args[1:])
	case "history":
		return gateHistory(ctx, e, args[1:])
	}
	return exitError{code: exitGateError, msg: gateUsage}
}

func gateFunctions(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("gate functions", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	rf := addRemoteFlags(fs, e)
	caseID := fs.String("case", "", "only this gate case")
	if _, err := parseInterleaved(e, fs, args); err != nil {
		return err
	}
	c, err := rf.client()
	if err != nil {
		return err
	}
	v, err := c.GateFunctions(ctx, *caseID)
	if err != nil {
		return refusal(err)
	}
	if *rf.json {
		return printJSON(e.stdout, v)
	}
	if len(v.CaseIDs) == 0 {
		fmt.Fprintf(e.stdout, "Workspace %s has no gate cases.\n", v.Workspace)
		return nil
	}
	fmt.Fprintf(e.stdout, "Gate cases: %s.\n", strings.Join(v.CaseIDs, ", "))
	for _, cs := range v.Cases {
		fmt.Fprintf(e.stdout, "\n%s — %s\n", cs.ID, cs.Name)
		for _, f := range cs.Functions {
			fmt.Fprintf(e.stdout, "  %s (commit %s: %s; soft commit %v, auto-repair %v)\n    %s\n", f.PreconditionFn, f.CommitID, f.CommitName, f.SoftCommit, f.HasAutoRepair, f.Doc)
			props, _ := f.EvidenceSchema["properties"].(map[string]any)
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			for _, name := range sortedNames(props) {
				p, _ := props[name].(map[string]any)
				fmt.Fprintf(tw, "    %s\t%v\t%v\n", name, p["type"], p["description"])
			}
			tw.Flush()
		}
	}
	return nil
}

func sortedNames(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func gateAuthorize(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("gate authorize", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	rf := addRemoteFlags(fs, e)
	caseID := fs.String("case", "", "gate case id (ladder gate functions lists them)")
	fn := fs.String("fn", "", "precondition function of the case")
	evidence := fs.String("evidence", "", "file holding the evidence JSON object, or - for stdin")
	if _, err := parseInterleaved(e, fs, args); err != nil {
		return err
	}
	if *caseID == "" || *fn == "" || *evidence == "" {
		return exitError{code: exitGateError, msg: gateUsage}
	}
	var (
		raw []byte
		err error
	)
	if *evidence == "-" {
		raw, err = io.ReadAll(io.LimitReader(e.stdin, 1<<20))
	} else {
		raw, err = os.ReadFile(*evidence)
	}
	if err != nil {
		return exitError{code: exitGateError, msg: fmt.Sprintf("read evidence: %v", err)}
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return exitError{code: exitGateError, msg: fmt.Sprintf("--evidence %s is not a JSON object: %v", *evidence, err)}
	}
	c, err := rf.client()
	if err != nil {
		return err
	}
	res, err := c.Authorize(ctx, ladder.AuthorizeRequest{Case: *caseID, PreconditionFn: *fn, Evidence: json.RawMessage(raw)})
	if err != nil {
		if ladder.ErrorCode(err) == ladder.CodeBypassToHuman {
			ee := refusal(err).(exitError)
			ee.code = exitBypassToHuman
			return ee
		}
		return refusal(err)
	}
	if *rf.json {
		if err := printJSON(e.stdout, res); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(e.stdout, res.HumanReadable)
		fmt.Fprintf(e.stdout, "gate_state %s  reason_code %s  Q %.3f (R %.2f, C %.2f, O %.2f, Ro %.2f)  repair_attempts %d  decision_id %s\n",
			res.GateState, res.ReasonCode, res.Q, res.R, res.C, res.O, res.Ro, res.RepairAttempts, res.DecisionID)
		if res.Notes != "" {
			fmt.Fprintln(e.stdout, "notes:", res.Notes)
		}
	}
	switch res.GateState {
	case gate.StatePass:
		return nil
	case gate.StateEscalate:
		return exitError{code: exitEscalate}
	case gate.StateBypassToHuman:
		return exitError{code: exitBypassToHuman}
	}
	return exitError{code: exitGateError, msg: fmt.Sprintf("unknown gate_state %q", res.GateState)}
}

func gateHistory(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("gate history", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	rf := addRemoteFlags(fs, e)
	var req ladder.GateHistoryRequest
	fs.StringVar(&req.Case, "case", "", "only this gate case")
	fs.StringVar(&req.PreconditionFn, "fn", "", "only this precondition function")
	fs.StringVar(&req.ActionID, "action", "", "only this commit (action_id)")
	fs.StringVar(&req.GateState, "state", "", "only PASS, ESCALATE or BYPASS_TO_HUMAN")
	fs.StringVar(&req.Since, "since", "", "only decisions at or after this RFC 3339 time")
	fs.StringVar(&req.Until, "until", "", "only decisions before this RFC 3339 time")
	fs.IntVar(&req.Limit, "limit", 0, "page size, 1–500 (default 50)")
	fs.StringVar(&req.Cursor, "cursor", "", "next_cursor of the previous page")
	all := fs.Bool("all", false, "follow next_cursor to the last page")
	if _, err := parseInterleaved(e, fs, args); err != nil {
		return err
	}
	c, err := rf.client()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	if !*rf.json {
		fmt.Fprintln(tw, "AT\tDECISION\tCASE\tFUNCTION\tACTION\tGATE STATE\tREASON\tQ")
	}
	var pages []ladder.GateHistoryPage
	for {
		p, err := c.GateHistory(ctx, req)
		if err != nil {
			return refusal(err)
		}
		pages = append(pages, p)
		for _, d := range p.Decisions {
			if !*rf.json {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.3f\n", d.At.Format("2006-01-02 15:04:05"), d.DecisionID, d.Case, orDash(d.PreconditionFn), d.ActionID, d.GateState, d.ReasonCode, d.Q)
			}
		}
		if !*all || p.NextCursor == "" {
			break
		}
		req.Cursor = p.NextCursor
	}
	if *rf.json {
		if len(pages) == 1 {
			return printJSON(e.stdout, pages[0])
		}
		var ds []ladder.GateResult
		for _, p := range pages {
			ds = append(ds, p.Decisions...)
		}
		return printJSON(e.stdout, ladder.GateHistoryPage{Workspace: pages[0].Workspace, Decisions: ds})
	}
	tw.Flush()
	if last := pages[len(pages)-1]; last.NextCursor != "" {
		fmt.Fprintf(e.stdout, "More decisions: --cursor %s (or --all).\n", last.NextCursor)
	}
	return nil
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "—"
	}
	return s
}

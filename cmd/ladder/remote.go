package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/client"
)

// remoteFlags are the flags of commands that talk to a running server.
type remoteFlags struct {
	server, key *string
	json        *bool
}

func addRemoteFlags(fs *flag.FlagSet, e env) remoteFlags {
	return remoteFlags{
		server: fs.String("server", envOr(e, "LADDER_SERVER", "http://127.0.0.1:8080"), "server URL (or LADDER_SERVER)"),
		key:    fs.String("key", e.getenv("LADDER_KEY"), "key (or LADDER_KEY)"),
		json:   fs.Bool("json", false, "print the server's JSON answer"),
	}
}

func envOr(e env, name, def string) string {
	if v := e.getenv(name); v != "" {
		return v
	}
	return def
}

func (r remoteFlags) client() (*client.Client, error) {
	if err := checkServerURL("--server", *r.server); err != nil {
		return nil, err
	}
	if *r.key == "" {
		return nil, exitError{code: 3, msg: "a key is required: pass --key or set LADDER_KEY"}
	}
	c := client.New(*r.server, *r.key)
	c.Surface = ladder.SurfaceCLI
	return c, nil
}

// checkServerURL refuses a server address that is not an http or https
// URL before anything is sent, naming the flag (or LADDER_SERVER): a
// host:port alone would otherwise fail inside the client as an internal
// error.
func checkServerURL(flagName, server string) error {
	if _, ok := httpURL(server); ok {
		return nil
	}
	example := "http://127.0.0.1:8080"
	if server != "" && !strings.Contains(server, "://") {
		// A host:port without a scheme: show it with one.
		example = "http://" + server
	}
	return exitError{code: 3, msg: fmt.Sprintf("ladder: %s (or LADDER_SERVER) %q is not a server URL; give its scheme and host, e.g. %s", flagName, server, example)}
}

// httpURL parses s as an http or https URL with a host.
func httpURL(s string) (*url.URL, bool) {
	u, err := url.Parse(s)
	return u, err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// parseInterleaved parses flags that may come before or after positional
// arguments (ladder route post_tms B-1 --json).
func parseInterleaved(e env, fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(e, fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func cmdSteps(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("steps", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	rf := addRemoteFlags(fs, e)
	queue := fs.String("queue", "", "only this queue")
	if _, err := parseInterleaved(e, fs, args); err != nil {
		return err
	}
	c, err := rf.client()
	if err != nil {
		return err
	}
	v, err := c.Steps(ctx, *queue)
	if err != nil {
		return refusal(err)
	}
	if *rf.json {
		return printJSON(e.stdout, v)
	}
	var alone []string
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tNAME\tLANE\tLAST 4 WEEKS\tAUDIT RATE\tWHY")
	for _, s := range v.Steps {
		acc := "—"
		if s.Last4WeeksAccuracy != nil {
			acc = fmt.Sprintf("%.1f%%", 100**s.Last4WeeksAccuracy)
		}
		if s.RunsAlone {
			alone = append(alone, s.Name)
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%.3f\t%s\n", s.Queue, s.Step, s.Name, s.Lane, acc, s.AuditRate, s.Why)
	}
	fmt.Fprintf(e.stdout, "Workspace %s. Runs alone: %s.\n\n", v.Workspace, orNone(alone))
	return tw.Flush()
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "; ")
}

func cmdEvidence(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("evidence", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	rf := addRemoteFlags(fs, e)
	queue := fs.String("queue", "", "the step's queue, when the name is not unique")
	pos, err := parseInterleaved(e, fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return exitError{code: 3, msg: "usage: ladder evidence STEP [--queue Q] [--json]   (STEP is an id or a plain name)"}
	}
	c, err := rf.client()
	if err != nil {
		return err
	}
	p, err := c.Evidence(ctx, *queue, strings.Join(pos, " "))
	if err != nil {
		return refusal(err)
	}
	if *rf.json {
		return printJSON(e.stdout, p)
	}
	fmt.Fprintf(e.stdout, "%s (%s/%s) is in %s.\n%s\n\n", p.Name, p.Queue, p.Step, p.Lane, p.Why)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WEEK\tISO WEEK\tN\tAGREED\tACCURACY\tWILSON 95%")
	for _, w := range p.Figures.Weekly {
		acc := "—"
		if w.Accuracy != nil {
			acc = fmt.Sprintf("%.3f", *w.Accuracy)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%.3f–%.3f\n", w.Week, w.ISOWeek, w.N, w.Agreements, acc, w.WilsonLower, w.WilsonUpper)
	}
	tw.Flush()
	r4 := p.Figures.Rolling4
	if r4.Accuracy != nil {
		fmt.Fprintf(e.stdout, "\nLast 4 weeks: %.1f%% on %d (Wilson %.3f–%.3f). Outcome test: %s.\n", 100**r4.Accuracy, r4.N, r4.WilsonLower, r4.WilsonUpper, p.OutcomeTest.State)
	}
	for _, ch := range p.LaneChanges {
		fmt.Fprintf(e.stdout, "  %s  %s → %s  %s  (%s)\n", ch.At.Format("2006-01-02"), ch.From, ch.To, ch.Rule, ch.Actor)
	}
	if p.NextMove != nil {
		fmt.Fprintf(e.stdout, "Next: %s %s\n", p.NextMove.Rule, p.NextMove.To)
		for name, n := range p.NextMove.Needs {
			mark := " "
			if n.Met {
				mark = "✓"
			}
			fmt.Fprintf(e.stdout, "  %s %s: have %v, need %v\n", mark, name, n.Have, n.Need)
		}
	}
	return nil
}

func cmdRoute(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("route", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	rf := addRemoteFlags(fs, e)
	queue := fs.String("queue", "", "the step's queue, when the name is not unique")
	features := fs.String("features", "", "features of the item as a JSON object")
	pos, err := parseInterleaved(e, fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return exitError{code: 3, msg: "usage: ladder route STEP ITEM [--queue Q] [--features JSON] [--json]"}
	}
	c, err := rf.client()
	if err != nil {
		return err
	}
	req := ladder.RouteRequest{Queue: *queue, Step: pos[0], Item: pos[1]}
	if *features != "" {
		if !json.Valid([]byte(*features)) {
			return exitError{code: 3, msg: "--features is not valid JSON; pass an object such as '{\"carrier\":\"ACME\"}'"}
		}
		req.Features = json.RawMessage(*features)
	}
	r, err := c.Route(ctx, req)
	if err != nil {
		return refusal(err)
	}
	if *rf.json {
		return printJSON(e.stdout, r)
	}
	fmt.Fprintf(e.stdout, "%s\nroute_id %s  decision %s  lane %s  audit %v (rate %.3f)\n", r.Reason, r.ID, r.Decision, r.Lane, r.Audit, r.AuditRate)
	return nil
}

func cmdReview(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("review", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	rf := addRemoteFlags(fs, e)
	agree := fs.Bool("agree", false, "the agent's output matched the person's")
	disagree := fs.Bool("disagree", false, "the agent's output did not match")
	severity := fs.Int("severity", 0, "for a disagreement: 1 (worst) to 3")
	correction := fs.String("correction", "", "the corrected output, as JSON")
	note := fs.String("note", "", "a note")
	opErr := fs.String("operator-error", "", "for a double-reviewed item: true if the first reviewer was wrong, false if right")
	adjudication := fs.Bool("adjudication", false, "overrule an earlier review of the same route")
	pos, err := parseInterleaved(e, fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *agree == *disagree {
		return exitError{code: 3, msg: "usage: ladder review ROUTE_ID --agree|--disagree [--severity 1-3] [--correction JSON] [--note TEXT] [--operator-error true|false] [--adjudication]"}
	}
	req := ladder.ReviewRequest{Verdict: "agree", Severity: *severity, Note: *note, Adjudication: *adjudication}
	if *disagree {
		req.Verdict = "disagree"
	}
	if *correction != "" {
		if !json.Valid([]byte(*correction)) {
			return exitError{code: 3, msg: "--correction is not valid JSON"}
		}
		req.Correction = json.RawMessage(*correction)
	}
	switch *opErr {
	case "":
	case "true", "false":
		b := *opErr == "true"
		req.OperatorError = &b
	default:
		return exitError{code: 3, msg: "--operator-error takes true or false"}
	}
	c, err := rf.client()
	if err != nil {
		return err
	}
	res, err := c.Review(ctx, pos[0], req)
	if err != nil {
		return refusal(err)
	}
	if *rf.json {
		return printJSON(e.stdout, res)
	}
	fmt.Fprintf(e.stdout, "Recorded review %s (%s). The step is in %s.\n", res.Review.ID, res.Review.Verdict, res.Lane)
	if ch := res.LaneChange; ch != nil {
		fmt.Fprintf(e.stdout, "Lane change: %s → %s by rule %s.\n", ch.From, ch.To, ch.Rule)
	}
	return nil
}

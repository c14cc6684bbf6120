package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/ladderhq/ladder/gateway"
)

// cmdAsk runs seed 000's Gateway procedure across the workspaces of a
// gateway file: ladder ask STEP --gateway FILE [--json]. It exits 0 when
// one step was found, 1 when the name was ambiguous, unknown or no
// workspace answered, and 3 on a usage or file error.
func cmdAsk(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("ask", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	file := fs.String("gateway", envOr(e, "LADDER_GATEWAY", "ladder-demo-gateway.yaml"), "gateway file: workspaces with server and key, and aliases (or LADDER_GATEWAY)")
	asJSON := fs.Bool("json", false, "print the structured answer as JSON")
	timeout := fs.Duration("timeout", 0, "per-workspace timeout (default: the file's, else 10s)")
	pos, err := parseInterleaved(e, fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return exitError{code: 3, msg: "usage: ladder ask STEP --gateway FILE [--json]   (STEP is an id, a plain name or an alias)"}
	}
	g, err := loadGateway(*file, e, *timeout)
	if err != nil {
		return err
	}
	ans, err := g.Ask(ctx, strings.Join(pos, " "))
	if err != nil {
		return refusal(err)
	}
	if *asJSON {
		if err := printJSON(e.stdout, ans); err != nil {
			return err
		}
	} else {
		printAnswer(e, ans)
	}
	if ans.Status != gateway.StatusFound {
		return exitError{code: 1}
	}
	return nil
}

func loadGateway(path string, e env, timeout time.Duration) (*gateway.Gateway, error) {
	f, err := gateway.Load(path)
	if err != nil {
		return nil, exitError{code: 3, msg: "ladder: " + err.Error()}
	}
	return gateway.New(f, gateway.Options{Getenv: e.getenv, Timeout: timeout, Version: version}), nil
}

// printAnswer prints the short human answer.
func printAnswer(e env, a gateway.Answer) {
	w := e.stdout
	switch a.Status {
	case gateway.StatusFound:
		fmt.Fprintf(w, "%s (%s · %s/%s) is in %s.\n", a.Name, a.Workspace, a.Queue, a.Step, a.Lane)
		if a.Alias != "" {
			fmt.Fprintf(w, "  (asked as %q, an alias of %s)\n", a.Alias, a.Name)
		}
		fmt.Fprintf(w, "Why: %s\n", a.Why)
		if r := a.Rolling4; r != nil && r.Accuracy != nil {
			fmt.Fprintf(w, "Last 4 weeks: %.1f%% on %d reviews — %s.\n", 100**r.Accuracy, r.N, gateway.AccuracyMeaning)
		} else {
			fmt.Fprintln(w, "Last 4 weeks: no reviews yet, so no accuracy figure.")
		}
	case gateway.StatusAmbiguous:
		fmt.Fprintf(w, "%q matches more than one step; none was picked:\n", a.Query)
		for _, c := range a.Candidates {
			fmt.Fprintf(w, "  %s (%s · %s/%s, %s)\n", c.Name, c.Workspace, c.Queue, c.Step, c.Lane)
		}
		fmt.Fprintln(w, "Ask again with one of these names.")
	case gateway.StatusNotFound:
		fmt.Fprintf(w, "No step matches %q.\n", a.Query)
		if len(a.Nearest) > 0 {
			fmt.Fprintln(w, "Nearest names:")
			for _, c := range a.Nearest {
				fmt.Fprintf(w, "  %s (%s · %s/%s)\n", c.Name, c.Workspace, c.Queue, c.Step)
			}
		}
	default:
		fmt.Fprintln(w, a.Answer)
		return
	}
	for _, u := range a.Unavailable {
		fmt.Fprintf(w, "Could not ask %s: %s — %s\n", u.Workspace, u.Code, u.Message)
	}
}

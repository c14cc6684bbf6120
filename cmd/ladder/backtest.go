package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/rules"
)

// rulesFile is the --rules file of `ladder backtest`: overrides of the
// default thresholds per class and per step ("workspace/step").
type rulesFile struct {
	ClassA *ladder.ThresholdOverrides           `yaml:"class_a"`
	ClassB *ladder.ThresholdOverrides           `yaml:"class_b"`
	Steps  map[string]ladder.ThresholdOverrides `yaml:"steps"`
}

func loadRulesFile(path string) (*rulesFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read rules: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var rf rulesFile
	if err := dec.Decode(&rf); err != nil {
		return nil, fmt.Errorf("%s: %w (expected class_a, class_b and steps: {workspace/step: {auto_lower: 0.99, …}})", path, err)
	}
	return &rf, nil
}

// thresholds returns a step's thresholds under the file: the class defaults,
// then the class overrides, then the step's.
func (rf *rulesFile) thresholds(workspace string, st ladder.Step) (ladder.Thresholds, error) {
	t := rules.Defaults(st.Class)
	if st.Class == ladder.ClassA {
		t = t.With(rf.ClassA)
	} else {
		t = t.With(rf.ClassB)
	}
	if o, ok := rf.Steps[workspace+"/"+st.ID]; ok {
		t = t.With(&o)
	}
	return t, t.Validate()
}

// parseWeeks reads "12w" (or a Go duration) as a time span.
func parseWeeks(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "w"); ok {
		w, err := strconv.Atoi(n)
		if err != nil || w <= 0 {
			return 0, fmt.Errorf("--since %q: give a number of weeks such as 12w", s)
		}
		return time.Duration(w) * 7 * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--since %q: give a number of weeks such as 12w", s)
	}
	return d, nil
}

func cmdBacktest(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("backtest", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	lf := addLocalFlags(fs)
	rulesPath := fs.String("rules", "", "YAML file of other thresholds to replay under (default: the rules in force)")
	sinceFlag := fs.String("since", "12w", "replay this far back, e.g. 12w")
	wsFlag := fs.String("workspace", "", "only this workspace")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	span, err := parseWeeks(*sinceFlag)
	if err != nil {
		return exitError{code: 3, msg: err.Error()}
	}
	var rf *rulesFile
	if *rulesPath != "" {
		if rf, err = loadRulesFile(*rulesPath); err != nil {
			return exitError{code: 3, msg: err.Error()}
		}
	}
	st, err := lf.openReadOnly(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	since := time.Now().Add(-span)
	var all []ladder.BacktestStep
	for _, ws := range st.svc.WorkspaceIDs() {
		if *wsFlag != "" && ws != *wsFlag {
			continue
		}
		var ruleErr error
		var rulesFor func(ladder.Step) ladder.Thresholds
		if rf != nil {
			rulesFor = func(s ladder.Step) ladder.Thresholds {
				t, err := rf.thresholds(ws, s)
				if err != nil && ruleErr == nil {
					ruleErr = fmt.Errorf("%s/%s: %w", ws, s.ID, err)
				}
				return t
			}
		}
		steps, err := st.svc.Backtest(ctx, ws, since, rulesFor)
		if err != nil {
			return refusal(err)
		}
		if ruleErr != nil {
			return exitError{code: 3, msg: "rules: " + ruleErr.Error()}
		}
		all = append(all, steps...)
	}
	if *asJSON {
		return printJSON(e.stdout, all)
	}
	fmt.Fprintf(e.stdout, "Replaying the recorded reviews, outcomes, pins and unpins one by one; moves since %s.\n", since.Format("2006-01-02"))
	for _, s := range all {
		if len(s.Actual) == 0 && len(s.Simulated) == 0 {
			continue
		}
		fmt.Fprintf(e.stdout, "\n%s/%s %s — started in %s; now %s, under these rules %s\n", s.Workspace, s.Step, s.Name, s.StartLane, s.EndActual, s.EndSim)
		fmt.Fprintf(e.stdout, "  %-10s %-36s %s\n", "WEEK", "HAPPENED", "WOULD HAVE")
		for _, row := range mergeMoves(s.Actual, s.Simulated) {
			fmt.Fprintf(e.stdout, "  %-10s %-36s %s\n", row[0], row[1], row[2])
		}
	}
	return nil
}

// mergeMoves lays actual and simulated moves side by side by ISO week.
func mergeMoves(actual, sim []ladder.BacktestMove) [][3]string {
	var weeks []string
	byWeek := map[string]*[3]string{}
	add := func(m ladder.BacktestMove, col int) {
		row, ok := byWeek[m.ISOWeek]
		if !ok {
			row = &[3]string{m.ISOWeek, "", ""}
			byWeek[m.ISOWeek] = row
			weeks = append(weeks, m.ISOWeek)
		}
		cell := fmt.Sprintf("%s→%s (%s)", m.From, m.To, m.Rule)
		if row[col] != "" {
			cell = row[col] + "; " + cell
		}
		row[col] = cell
	}
	for _, m := range actual {
		add(m, 1)
	}
	for _, m := range sim {
		add(m, 2)
	}
	sortStrings(weeks)
	out := make([][3]string, 0, len(weeks))
	for _, w := range weeks {
		out = append(out, *byWeek[w])
	}
	return out
}

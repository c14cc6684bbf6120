package service

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/rules"
	"github.com/ladderhq/ladder/stats"
)

// weekSeries is a step's aggregates laid out by week number: week 1 is the
// step's first week of records, and missing weeks are zero rows.
type weekSeries struct {
	first time.Time // Monday of week 1
	rows  []ladder.WeekAgg
}

func weekIndex(first, start time.Time) int {
	return int(math.Round(start.Sub(first).Hours()/(24*7))) + 1
}

// buildSeries sums aggregates per week. With epoch >= 0 only that epoch's
// rows count (the rules' view); with epoch < 0 every epoch counts (what a
// person reads in the pack).
func buildSeries(weeks []ladder.WeekAgg, epoch int, upto time.Time) weekSeries {
	if len(weeks) == 0 {
		return weekSeries{}
	}
	first := weeks[0].WeekStart
	for _, w := range weeks {
		if w.WeekStart.Before(first) {
			first = w.WeekStart
		}
	}
	last := 0
	for _, w := range weeks {
		last = max(last, weekIndex(first, w.WeekStart))
	}
	if !upto.IsZero() {
		_, start := ladder.ISOWeek(upto)
		last = max(last, weekIndex(first, start))
	}
	rows := make([]ladder.WeekAgg, last)
	for i := range rows {
		rows[i].WeekStart = first.AddDate(0, 0, 7*i)
		rows[i].ISOWeek, _ = ladder.ISOWeek(rows[i].WeekStart)
	}
	for _, w := range weeks {
		if epoch >= 0 && w.Epoch != epoch {
			continue
		}
		r := &rows[weekIndex(first, w.WeekStart)-1]
		*r = r.Plus(w)
	}
	return weekSeries{first: first, rows: rows}
}

func (ws weekSeries) counts() []stats.Counts {
	out := make([]stats.Counts, len(ws.rows))
	for i, r := range ws.rows {
		out[i] = stats.Counts{N: r.N, Agreements: r.Agreements}
	}
	return out
}

// tail returns the pooled aggregate of the last k rows.
func (ws weekSeries) tail(k int) ladder.WeekAgg {
	var t ladder.WeekAgg
	for i := max(0, len(ws.rows)-k); i < len(ws.rows); i++ {
		t = t.Plus(ws.rows[i])
	}
	return t
}

func rolling(ws weekSeries, k int) ladder.Window {
	if len(ws.rows) == 0 {
		return stats.NewWindow(0, 0, stats.Counts{}, stats.Z95)
	}
	return stats.Rolling(ws.counts(), k, stats.Z95)
}

// figures builds the pack's figures from every epoch, up to the last week
// with records (the "evidence to week N" of seed 000).
func figures(weeks []ladder.WeekAgg) (ladder.Figures, int) {
	ws := buildSeries(weeks, -1, time.Time{})
	f := ladder.Figures{Weekly: []ladder.WeekRow{}}
	for i, r := range ws.rows {
		lo, hi := stats.Wilson(r.Agreements, r.N, stats.Z95)
		row := ladder.WeekRow{Week: i + 1, ISOWeek: r.ISOWeek, N: r.N, Agreements: r.Agreements, WilsonLower: round4(lo), WilsonUpper: round4(hi)}
		if r.N > 0 {
			a := round4(float64(r.Agreements) / float64(r.N))
			row.Accuracy = &a
		}
		f.Weekly = append(f.Weekly, row)
	}
	f.Rolling2 = roundWindow(rolling(ws, 2))
	f.Rolling4 = roundWindow(rolling(ws, 4))
	return f, len(ws.rows)
}

// operatorErrorInForce is the operator error the lane rules compare the
// agent's error with (propose → auto), over the same window: the current
// epoch's last four weeks up to now (RuleInput). A step in auto has no
// person-handled items to double-review, so for it the figure is the one its
// promotion to auto used, as that lane change recorded it.
func operatorErrorInForce(in rules.Input, lane ladder.Lane, changes []ladder.LaneChange) ladder.OperatorError {
	n, errs := in.OperatorN, in.OperatorErrors
	if lane == ladder.LaneAuto {
		for i := len(changes) - 1; i >= 0; i-- {
			c := changes[i]
			if c.To != ladder.LaneAuto {
				continue
			}
			if c.Rule == rules.RuleProposeToAuto {
				n, errs = int(c.Numbers["operator_n"]), int(c.Numbers["operator_errors"])
			}
			break
		}
	}
	op := ladder.OperatorError{N: n, Errors: errs}
	if n > 0 {
		r := round4(float64(errs) / float64(n))
		op.Rate = &r
	}
	return op
}

func round4(x float64) float64 { return math.Round(x*10000) / 10000 }

func roundWindow(w ladder.Window) ladder.Window {
	w.WilsonLower, w.WilsonUpper = round4(w.WilsonLower), round4(w.WilsonUpper)
	if w.Accuracy != nil {
		a := round4(*w.Accuracy)
		w.Accuracy = &a
	}
	return w
}

// RuleInput gathers what the lane rules need for one step from its state,
// its aggregates and its outcome counts. Promotion figures (rolling 4 weeks,
// operator error) count the current epoch only; the demotion figure (rolling
// 2 weeks) reads every epoch, since DESIGN.md §4 limits only promotion to
// reviews taken after a demotion.
func RuleInput(step ladder.Step, state ladder.StepState, weeks []ladder.WeekAgg, oc ladder.OutcomeCounts, now time.Time) rules.Input {
	r2 := buildSeries(weeks, -1, now).tail(2)
	r4 := buildSeries(weeks, state.Epoch, now).tail(4)
	return rules.Input{
		Class: step.Class, Lane: state.Lane, LaneSince: state.LaneSince, Now: now, Pinned: state.Pinned,
		Rolling2:  stats.Counts{N: r2.N, Agreements: r2.Agreements},
		Rolling4:  stats.Counts{N: r4.N, Agreements: r4.Agreements},
		OperatorN: r4.OpN, OperatorErrors: r4.OpErrors,
		Outcome:    OutcomeTest(oc),
		LastSev1At: state.LastSev1At,
	}
}

// OutcomeTest runs the non-inferiority test of agent- against
// person-handled outcome failures (margin 2 points, α 0.05).
func OutcomeTest(oc ladder.OutcomeCounts) stats.NIResult {
	return stats.NonInferiority(oc.AgentN, oc.AgentFailures, oc.PersonN, oc.PersonFailures, stats.DefaultMargin, stats.DefaultAlpha)
}

// pct formats a proportion as a percentage with one decimal.
func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// Why is the one sentence that says why a step is in its lane (seed 000).
func Why(step ladder.Step, state ladder.StepState, weeks []ladder.WeekAgg, th ladder.Thresholds, now time.Time) string {
	ws := buildSeries(weeks, -1, time.Time{})
	switch {
	case state.Pinned:
		return fmt.Sprintf("A person pinned this step to %s: %s; the rules do not move it until it is unpinned.", state.Lane, state.PinReason)
	case state.Lane == ladder.LaneHumanOnly:
		return "A person does this step; it moves only when a person pins it to shadow so the agent's work can be measured."
	case state.Lane == ladder.LaneAuto:
		a := ws.tail(2)
		if a.AuditN == 0 {
			return "No audits in the last 2 weeks yet; the step drops back if the outcome test or the audits turn."
		}
		return fmt.Sprintf("Audits in the last 2 weeks: %s right on %d; the step drops back if the outcome test or the audits turn.",
			pct(float64(a.AuditAgree)/float64(a.AuditN)), a.AuditN)
	case state.Lane == ladder.LanePropose:
		t := ws.tail(4)
		if t.N == 0 {
			return fmt.Sprintf("A person approves every proposal; no reviews in the last 4 weeks yet, and auto needs a Wilson lower bound of %.2f on %d.", th.AutoLower, th.AutoMinN)
		}
		lo, _ := stats.Wilson(t.Agreements, t.N, stats.Z95)
		return fmt.Sprintf("A person approves every proposal: %s accepted unchanged on %d in the last 4 weeks (Wilson lower bound %.3f); auto needs %.2f on %d.",
			pct(float64(t.Agreements)/float64(t.N)), t.N, lo, th.AutoLower, th.AutoMinN)
	default: // shadow
		t := ws.tail(4)
		if t.N == 0 {
			return fmt.Sprintf("The agent works in shadow; no comparisons in the last 4 weeks yet, and propose needs a Wilson lower bound of %.2f on %d.", th.ProposeLower, th.ProposeMinN)
		}
		lo, _ := stats.Wilson(t.Agreements, t.N, stats.Z95)
		return fmt.Sprintf("The agent works in shadow: it agreed with the person on %s of %d items in the last 4 weeks (Wilson lower bound %.3f); propose needs %.2f on %d.",
			pct(float64(t.Agreements)/float64(t.N)), t.N, lo, th.ProposeLower, th.ProposeMinN)
	}
}

// sortWeeks orders aggregates by week, then epoch.
func sortWeeks(w []ladder.WeekAgg) {
	sort.Slice(w, func(i, j int) bool {
		if !w[i].WeekStart.Equal(w[j].WeekStart) {
			return w[i].WeekStart.Before(w[j].WeekStart)
		}
		return w[i].Epoch < w[j].Epoch
	})
}

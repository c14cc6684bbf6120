package demo_test

import (
	"database/sql"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	_ "modernc.org/sqlite" // the raw rows are read with SQL, beside the server

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
)

// TestEvidenceRecomputedFromRawReviews seeds the demo into a SQLite file,
// then recomputes every figure of every step's evidence pack from the raw
// rows (reviews, lane changes, outcomes) with SQL and the formulas written
// out here, independently of the service's aggregation code (the week rows,
// buildSeries, the stats package), and compares them with what GET
// /v1/steps/{queue}/{step}/evidence returns: the weekly figures and their
// Wilson bounds, the rolling 2- and 4-week windows, the operator error in
// force, the outcome test, the audit rate and the numbers each rule move
// recorded. (Before, the demo wrote weekly aggregates directly and kept
// only some raw reviews, so nothing could be recomputed.)
func TestEvidenceRecomputedFromRawReviews(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.db")
	e := testenv.StartWith(t, "", testenv.Options{Seed: true, DBPath: path})
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := e.Clock.Now()
	checked := 0
	for i := range e.Config.Workspaces {
		w := &e.Config.Workspaces[i]
		for _, st := range w.Steps() {
			var pack ladder.EvidencePack
			res := e.Do("GET", "/v1/steps/"+st.Queue+"/"+st.ID+"/evidence", e.Keys[w.ID+"/agent"], nil)
			if err := json.Unmarshal(res.Raw, &pack); err != nil {
				t.Fatalf("%s/%s: %v", w.ID, st.ID, err)
			}
			h := readHistory(t, db, ladder.StepKey{Workspace: w.ID, Queue: st.Queue, Step: st.ID})
			if len(h.reviews) == 0 {
				continue
			}
			checked++
			want := h.pack(pack, now, float64(st.WeeklyVolume), st.AuditRate)
			if diff := cmp.Diff(want, recomputed(pack)); diff != "" {
				t.Errorf("%s/%s: the pack differs from the raw rows (-recomputed +served):\n%s", w.ID, st.ID, diff)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d steps have raw reviews", checked)
	}
}

// figuresOf is what the check compares of a pack.
type figuresOf struct {
	EvidenceToWeek int
	Weekly         []ladder.WeekRow
	Rolling2       ladder.Window
	Rolling4       ladder.Window
	OperatorError  ladder.OperatorError
	Outcome        outcomeOf
	AuditRate      float64
	MoveNumbers    []map[string]float64
}

type outcomeOf struct {
	State                   ladder.NIState
	AgentN, AgentFailures   int
	PersonN, PersonFailures int
	PValue                  float64
}

// recomputed picks the figures of a served pack.
func recomputed(p ladder.EvidencePack) figuresOf {
	f := figuresOf{EvidenceToWeek: p.EvidenceToWeek, Weekly: p.Figures.Weekly, Rolling2: p.Figures.Rolling2, Rolling4: p.Figures.Rolling4,
		OperatorError: p.Figures.OperatorError, AuditRate: p.AuditRate,
		Outcome: outcomeOf{State: p.OutcomeTest.State, AgentN: p.OutcomeTest.Agent.N, AgentFailures: p.OutcomeTest.Agent.Failures,
			PersonN: p.OutcomeTest.Person.N, PersonFailures: p.OutcomeTest.Person.Failures}}
	if p.OutcomeTest.PValue != nil {
		f.Outcome.PValue = *p.OutcomeTest.PValue
	}
	for _, c := range p.LaneChanges {
		f.MoveNumbers = append(f.MoveNumbers, pick(c.Numbers))
	}
	return f
}

// pick keeps the counts a rule move recorded.
func pick(n map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, k := range []string{"rolling_4_n", "rolling_4_agreements", "rolling_2_n", "rolling_2_agreements", "operator_n", "operator_errors"} {
		if v, ok := n[k]; ok {
			out[k] = v
		}
	}
	return out
}

type rawReview struct {
	route, kind, verdict string
	opErr                sql.NullInt64
	at                   time.Time
}

type rawChange struct {
	at       time.Time
	from, to ladder.Lane
	rule     string
}

type rawHistory struct {
	reviews  []rawReview // in the order they were recorded
	changes  []rawChange
	outcomes outcomeOf
}

func readHistory(t *testing.T, db *sql.DB, k ladder.StepKey) rawHistory {
	t.Helper()
	var h rawHistory
	parse := func(s string) time.Time {
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return at.UTC()
	}
	rows, err := db.Query(`SELECT route_id, kind, verdict, operator_error, at FROM reviews WHERE workspace = ? AND queue = ? AND step = ? ORDER BY rowid`, k.Workspace, k.Queue, k.Step)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r rawReview
		var at string
		if err := rows.Scan(&r.route, &r.kind, &r.verdict, &r.opErr, &at); err != nil {
			t.Fatal(err)
		}
		r.at = parse(at)
		h.reviews = append(h.reviews, r)
	}
	rows.Close()
	rows, err = db.Query(`SELECT at, from_lane, to_lane, rule FROM lane_changes WHERE workspace = ? AND queue = ? AND step = ? ORDER BY at, rowid`, k.Workspace, k.Queue, k.Step)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c rawChange
		var at string
		if err := rows.Scan(&at, &c.from, &c.to, &c.rule); err != nil {
			t.Fatal(err)
		}
		c.at = parse(at)
		h.changes = append(h.changes, c)
	}
	rows.Close()
	rows, err = db.Query(`SELECT handled_by, ok FROM outcomes WHERE workspace = ? AND queue = ? AND step = ?`, k.Workspace, k.Queue, k.Step)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var by string
		var ok bool
		if err := rows.Scan(&by, &ok); err != nil {
			t.Fatal(err)
		}
		if by == "agent" {
			h.outcomes.AgentN++
			if !ok {
				h.outcomes.AgentFailures++
			}
		} else {
			h.outcomes.PersonN++
			if !ok {
				h.outcomes.PersonFailures++
			}
		}
	}
	rows.Close()
	return h
}

// monday is the start of t's ISO week.
func monday(t time.Time) time.Time {
	t = t.UTC()
	d := (int(t.Weekday()) + 6) % 7
	return time.Date(t.Year(), t.Month(), t.Day()-d, 0, 0, 0, 0, time.UTC)
}

func isoWeek(t time.Time) string {
	y, w := t.ISOWeek()
	return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC).Format("2006") + "-W" + string(rune('0'+w/10)) + string(rune('0'+w%10))
}

func r4(x float64) float64 { return math.Round(x*10000) / 10000 }

// wilson is the Wilson score interval at z 1.96.
func wilson(k, n int) (float64, float64) {
	if n == 0 {
		return 0, 1
	}
	const z = 1.96
	p, nf := float64(k)/float64(n), float64(n)
	c := p + z*z/(2*nf)
	h := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf))
	d := 1 + z*z/nf
	return math.Max(0, (c-h)/d), math.Min(1, (c+h)/d)
}

// epochAt is the promotion epoch at t: the moves down before it.
func (h rawHistory) epochAt(t time.Time) int {
	n := 0
	for _, c := range h.changes {
		if c.at.Before(t) && slices.Index(ladder.Lanes, c.to) < slices.Index(ladder.Lanes, c.from) {
			n++
		}
	}
	return n
}

// counted returns the review each route counts as of t (the last one
// recorded: an adjudication replaces the verdict it overrules), with the
// epoch it counts in.
func (h rawHistory) counted(t time.Time) map[string]rawReview {
	out := map[string]rawReview{}
	for _, r := range h.reviews {
		if !r.at.After(t) {
			out[r.route] = r
		}
	}
	return out
}

type tally struct{ n, agree, opN, opErr int }

// window tallies the reviews counted as of t in the weeks [from, to]
// (Mondays), of one epoch (all when epoch < 0).
func (h rawHistory) window(t, from, to time.Time, epoch int) tally {
	var w tally
	for _, r := range h.counted(t) {
		m := monday(r.at)
		if m.Before(from) || m.After(to) || (epoch >= 0 && h.epochAt(r.at) != epoch) {
			continue
		}
		w.n++
		if r.verdict == "agree" {
			w.agree++
		}
		if r.opErr.Valid {
			w.opN++
			if r.opErr.Int64 != 0 {
				w.opErr++
			}
		}
	}
	return w
}

func windowOf(from, to int, w tally) ladder.Window {
	out := ladder.Window{From: from, To: to, N: w.n, Agreements: w.agree}
	lo, hi := wilson(w.agree, w.n)
	out.WilsonLower, out.WilsonUpper = r4(lo), r4(hi)
	if w.n > 0 {
		a := r4(float64(w.agree) / float64(w.n))
		out.Accuracy = &a
	}
	return out
}

// pack recomputes the figures of a step's pack from its raw rows.
func (h rawHistory) pack(served ladder.EvidencePack, now time.Time, volume, configRate float64) figuresOf {
	const week = 7 * 24 * time.Hour
	end := h.reviews[len(h.reviews)-1].at
	first, last := monday(h.reviews[0].at), monday(h.reviews[0].at)
	for _, r := range h.reviews {
		first, last = minTime(first, monday(r.at)), maxTime(last, monday(r.at))
	}
	weeks := int(last.Sub(first)/week) + 1
	f := figuresOf{EvidenceToWeek: weeks}
	for i := range weeks {
		m := first.AddDate(0, 0, 7*i)
		w := h.window(end, m, m, -1)
		lo, hi := wilson(w.agree, w.n)
		row := ladder.WeekRow{Week: i + 1, ISOWeek: isoWeek(m), N: w.n, Agreements: w.agree, WilsonLower: r4(lo), WilsonUpper: r4(hi)}
		if w.n > 0 {
			a := r4(float64(w.agree) / float64(w.n))
			row.Accuracy = &a
		}
		f.Weekly = append(f.Weekly, row)
	}
	f.Rolling2 = windowOf(max(weeks-1, 1), weeks, h.window(end, last.AddDate(0, 0, -7), last, -1))
	f.Rolling4 = windowOf(max(weeks-3, 1), weeks, h.window(end, last.AddDate(0, 0, -21), last, -1))

	// The operator error in force: the current epoch's last four weeks up
	// to now; in auto, what the promotion to auto used.
	at := func(t time.Time) tally {
		return h.window(t, monday(t).AddDate(0, 0, -21), monday(t), h.epochAt(t.Add(time.Nanosecond)))
	}
	op := at(now)
	if served.Lane == ladder.LaneAuto {
		op = tally{}
		for i := len(h.changes) - 1; i >= 0; i-- {
			if c := h.changes[i]; c.to == ladder.LaneAuto {
				if c.rule == "propose_to_auto" {
					op = h.window(c.at, monday(c.at).AddDate(0, 0, -21), monday(c.at), h.epochAt(c.at))
				}
				break
			}
		}
	}
	f.OperatorError = ladder.OperatorError{N: op.opN, Errors: op.opErr}
	if op.opN > 0 {
		r := r4(float64(op.opErr) / float64(op.opN))
		f.OperatorError.Rate = &r
	}

	// The numbers each move recorded, from the reviews counted when it was
	// made.
	for _, c := range h.changes {
		n := map[string]float64{}
		switch c.rule {
		case "shadow_to_propose", "propose_to_auto":
			w := h.window(c.at, monday(c.at).AddDate(0, 0, -21), monday(c.at), h.epochAt(c.at))
			n["rolling_4_n"], n["rolling_4_agreements"] = float64(w.n), float64(w.agree)
			if c.rule == "propose_to_auto" {
				n["operator_n"], n["operator_errors"] = float64(w.opN), float64(w.opErr)
			}
		case "auto_to_propose_upper_bound", "propose_to_shadow_upper_bound":
			w := h.window(c.at, monday(c.at).AddDate(0, 0, -7), monday(c.at), -1)
			n["rolling_2_n"], n["rolling_2_agreements"] = float64(w.n), float64(w.agree)
		}
		f.MoveNumbers = append(f.MoveNumbers, n)
	}

	// The outcome test: the one-sided Wald test of the failure rates'
	// difference against a 2-point margin at α 0.05, unpooled.
	o := h.outcomes
	if o.AgentN > 0 && o.PersonN > 0 {
		pa, pp := float64(o.AgentFailures)/float64(o.AgentN), float64(o.PersonFailures)/float64(o.PersonN)
		d := pa - pp
		se := math.Sqrt(pa*(1-pa)/float64(o.AgentN) + pp*(1-pp)/float64(o.PersonN))
		p := 1.0
		if se > 0 {
			p = 0.5 * math.Erfc(-((d-0.02)/se)/math.Sqrt2)
		} else if d < 0.02 {
			p = 0
		}
		lower := d - 1.6448536269514722*se
		o.PValue = r4(p)
		switch {
		case o.AgentN < 30 || o.PersonN < 30:
			o.State = ladder.NIInconclusive
		case p < 0.05:
			o.State = ladder.NIPass
		case lower > 0.02:
			o.State = ladder.NIFail
		default:
			o.State = ladder.NIInconclusive
		}
	} else {
		o.State = ladder.NINotStarted
	}
	f.Outcome = o

	// The audit rate: the start rate, doubled by every failed audit and
	// halved after eight clean weeks in auto, in [0.05, 1] for a
	// money-moving step ([0.02, 1] otherwise).
	floor := 0.02
	if served.MoneyMoving {
		floor = 0.05
	}
	clamp := func(r float64) float64 { return math.Min(math.Max(r, floor), 1) }
	rate := configRate
	if rate == 0 {
		rate = clamp(math.Ceil(math.Log(0.05)/math.Log(served.Thresholds.AutoLower)) / (4 * volume))
	}
	since := h.reviews[0].at
	lane := ladder.LaneShadow
	ci := 0
	for _, r := range h.reviews {
		for ci < len(h.changes) && h.changes[ci].at.Before(r.at) {
			lane = h.changes[ci].to
			if lane == ladder.LaneAuto {
				since = h.changes[ci].at
			}
			ci++
		}
		if r.kind != "audit" {
			continue
		}
		switch {
		case r.verdict == "disagree":
			rate, since = clamp(rate*2), r.at
		case lane == ladder.LaneAuto && r.at.Sub(since) >= 8*week:
			rate, since = clamp(rate/2), r.at
		}
	}
	f.AuditRate = r4(rate)
	return f
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

package console

import (
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"

	"github.com/ladderhq/ladder"
)

// windowView is a pooled window as the pages print it.
type windowView struct {
	From, To, N, Agreements int
	Accuracy                string // 4 decimals, or "—" with no reviews
	Percent                 string
	Lower, Upper            string
}

func num4(x float64) string { return fmt.Sprintf("%.4f", x) }

func newWindowView(w ladder.Window) windowView {
	v := windowView{From: w.From, To: w.To, N: w.N, Agreements: w.Agreements, Accuracy: "—", Percent: "—", Lower: num4(w.WilsonLower), Upper: num4(w.WilsonUpper)}
	if w.Accuracy != nil {
		v.Accuracy, v.Percent = num4(*w.Accuracy), fmt.Sprintf("%.1f%%", 100**w.Accuracy)
	}
	return v
}

// stepRow is one row of the steps table.
type stepRow struct {
	ladder.StepSummary
	Pinned   bool
	Rolling4 windowView
	Next     string
	Far      string
}

// nextText says the next move and how far the step is from it.
func nextText(nm *ladder.NextMoveView) (string, string) {
	if nm == nil {
		return "none", ""
	}
	next := nm.Rule
	if nm.To != "" {
		next = "to " + string(nm.To) + ": " + nm.Rule
	}
	var names []string
	for n := range nm.Needs {
		names = append(names, n)
	}
	sort.Strings(names)
	met := 0
	var missing []string
	for _, n := range names {
		rq := nm.Needs[n]
		if rq.Met {
			met++
		} else {
			missing = append(missing, fmt.Sprintf("%s %s of %s", strings.ReplaceAll(n, "_", " "), fmtAny(rq.Have), fmtAny(rq.Need)))
		}
	}
	if len(names) == 0 {
		return next, ""
	}
	far := fmt.Sprintf("%d of %d conditions met", met, len(names))
	if len(missing) > 0 {
		far += "; still needs " + strings.Join(missing, ", ")
	}
	return next, far
}

func fmtAny(v any) string {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e9 {
			return fmt.Sprintf("%d", int64(x))
		}
		return fmt.Sprintf("%.4g", x)
	case nil:
		return "—"
	}
	return fmt.Sprint(v)
}

func (h *Handler) steps(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	view, err := h.svc.StepsRunAlone(r.Context(), p.Workspace, "", "")
	if err != nil {
		return err
	}
	rows := make([]stepRow, 0, len(view.Steps))
	for _, s := range view.Steps {
		row := stepRow{StepSummary: s}
		if ev, err := h.svc.Evidence(r.Context(), p.Workspace, s.Queue, s.Step); err == nil {
			row.Pinned = ev.Pinned
			row.Rolling4 = newWindowView(ev.Figures.Rolling4)
			row.Next, row.Far = nextText(ev.NextMove)
		}
		rows = append(rows, row)
	}
	ws, _ := h.svc.Workspace(p.Workspace)
	h.render(w, r, http.StatusOK, "steps", page{Title: "Steps", Nav: "steps", Data: struct {
		Workspace *ladder.Workspace
		Sentence  string
		Rows      []stepRow
	}{ws, view.Sentence, rows}})
	return nil
}

// chart is a server-rendered SVG chart of weekly accuracy.
type chart struct {
	W, H, Left, Right, Top, Bottom float64
	Band                           string // polygon points of the Wilson band
	Line                           string // polyline points of the accuracy
	Points                         []chartPoint
	YTicks                         []chartTick
	XTicks                         []chartTick
	Thresholds                     []chartLine
	Desc                           string
}

type chartPoint struct {
	X, Y  float64
	Label string
}

type chartTick struct {
	Pos   float64
	Label string
}

type chartLine struct {
	Y           float64
	Label, Kind string
}

// newChart lays out the weekly figures with their Wilson band and the lane
// thresholds.
func newChart(weeks []ladder.WeekRow, th ladder.Thresholds) chart {
	c := chart{W: 640, H: 280, Left: 48, Right: 150, Top: 16, Bottom: 36}
	lo := math.Min(th.ProposeLower, th.AutoLower)
	for _, wk := range weeks {
		if wk.N > 0 {
			lo = math.Min(lo, wk.WilsonLower)
		}
	}
	lo = math.Max(0, math.Floor((lo-0.02)*20)/20)
	n := len(weeks)
	x := func(i int) float64 {
		if n <= 1 {
			return c.Left + (c.W-c.Left-c.Right)/2
		}
		return c.Left + float64(i)*(c.W-c.Left-c.Right)/float64(n-1)
	}
	y := func(v float64) float64 { return c.Top + (1-v)/(1-lo)*(c.H-c.Top-c.Bottom) }
	for t := lo; t <= 1.0001; t += 0.05 {
		c.YTicks = append(c.YTicks, chartTick{Pos: y(t), Label: fmt.Sprintf("%.0f%%", 100*t)})
	}
	var upper, lower, line []string
	for i, wk := range weeks {
		c.XTicks = append(c.XTicks, chartTick{Pos: x(i), Label: fmt.Sprint(wk.Week)})
		if wk.N == 0 || wk.Accuracy == nil {
			continue
		}
		upper = append(upper, fmt.Sprintf("%.1f,%.1f", x(i), y(wk.WilsonUpper)))
		lower = append([]string{fmt.Sprintf("%.1f,%.1f", x(i), y(wk.WilsonLower))}, lower...)
		line = append(line, fmt.Sprintf("%.1f,%.1f", x(i), y(*wk.Accuracy)))
		c.Points = append(c.Points, chartPoint{X: x(i), Y: y(*wk.Accuracy), Label: fmt.Sprintf("week %d (%s): %.1f%% of %d, Wilson %.3f–%.3f", wk.Week, wk.ISOWeek, 100**wk.Accuracy, wk.N, wk.WilsonLower, wk.WilsonUpper)})
	}
	c.Band = strings.Join(append(upper, lower...), " ")
	c.Line = strings.Join(line, " ")
	c.Thresholds = []chartLine{
		{Y: y(th.AutoLower), Label: fmt.Sprintf("auto %.0f%%", 100*th.AutoLower), Kind: "auto"},
		{Y: y(th.ProposeLower), Label: fmt.Sprintf("propose %.0f%%", 100*th.ProposeLower), Kind: "propose"},
	}
	c.Desc = fmt.Sprintf("Weekly estimated accuracy for %d weeks with its Wilson 95%% band; dashed lines mark the propose (%.0f%%) and auto (%.0f%%) thresholds. The table below has the same numbers.", n, 100*th.ProposeLower, 100*th.AutoLower)
	return c
}

// weekView is a row of the weekly table.
type weekView struct {
	Week       int
	ISOWeek    string
	N          int
	Agreements int
	Accuracy   string
	Lower      string
	Upper      string
}

// stepData is the step page's data.
type stepData struct {
	Pack      ladder.EvidencePack
	Chart     chart
	Weeks     []weekView
	Rolling2  windowView
	Rolling4  windowView
	OpRate    string
	PValue    string
	Next      string
	Far       string
	Lanes     []ladder.Lane
	Errors    map[string]string
	Form      map[string]string
	PinReason string
}

func (h *Handler) stepPage(w http.ResponseWriter, r *http.Request) error {
	return h.showStep(w, r, http.StatusOK, nil)
}

func (h *Handler) showStep(w http.ResponseWriter, r *http.Request, status int, errs map[string]string) error {
	p := principalOf(r)
	ev, err := h.svc.Evidence(r.Context(), p.Workspace, r.PathValue("queue"), r.PathValue("step"))
	if err != nil {
		return err
	}
	if ev.Queue != r.PathValue("queue") || ev.Step != r.PathValue("step") {
		// FindStep matches loosely; the console's links are exact.
		return errNotFound
	}
	d := stepData{Pack: ev, Chart: newChart(ev.Figures.Weekly, ev.Thresholds), Rolling2: newWindowView(ev.Figures.Rolling2), Rolling4: newWindowView(ev.Figures.Rolling4),
		OpRate: "—", PValue: "—", Lanes: ladder.Lanes, Errors: errs, Form: map[string]string{"lane": r.PostFormValue("lane"), "reason": r.PostFormValue("reason")}}
	for _, wk := range ev.Figures.Weekly {
		v := weekView{Week: wk.Week, ISOWeek: wk.ISOWeek, N: wk.N, Agreements: wk.Agreements, Accuracy: "—", Lower: num4(wk.WilsonLower), Upper: num4(wk.WilsonUpper)}
		if wk.Accuracy != nil {
			v.Accuracy = num4(*wk.Accuracy)
		}
		d.Weeks = append(d.Weeks, v)
	}
	if oe := ev.Figures.OperatorError.Rate; oe != nil {
		d.OpRate = num4(*oe)
	}
	if ev.OutcomeTest.PValue != nil {
		d.PValue = num4(*ev.OutcomeTest.PValue)
	}
	d.Next, d.Far = nextText(ev.NextMove)
	if st, err := h.svc.StepState(r.Context(), p, ev.Queue, ev.Step); err == nil {
		d.PinReason = st.PinReason
	}
	// Newest lane change first.
	ch := make([]ladder.LaneChange, len(ev.LaneChanges))
	copy(ch, ev.LaneChanges)
	sort.SliceStable(ch, func(i, j int) bool { return ch[i].At.After(ch[j].At) })
	d.Pack.LaneChanges = ch
	h.render(w, r, status, "step", page{Title: ev.Name, Nav: "steps", Data: d})
	return nil
}

func (h *Handler) pin(pin bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		p := principalOf(r)
		queue, step := r.PathValue("queue"), r.PathValue("step")
		if _, err := h.svc.Evidence(r.Context(), p.Workspace, queue, step); err != nil {
			return err
		}
		req := ladder.PinRequest{Lane: r.PostFormValue("lane"), Reason: strings.TrimSpace(r.PostFormValue("reason"))}
		if _, err := h.svc.Pin(r.Context(), p, queue, step, req, pin); err != nil {
			e := ladder.AsError(err)
			if f, _ := e.Data["field"].(string); e.Code == ladder.CodeInvalidArgument && f != "" {
				key := f
				if !pin {
					key = "unpin_" + f
				}
				msg := e.Message
				if f == "reason" {
					msg = "Say why, in a sentence; it is shown with the lane change."
				}
				return h.showStep(w, r, http.StatusUnprocessableEntity, map[string]string{key: msg})
			}
			return err
		}
		done := "pinned"
		if !pin {
			done = "unpinned"
		}
		http.Redirect(w, r, "/console/steps/"+queue+"/"+step+"?done="+done, http.StatusSeeOther)
		return nil
	}
}

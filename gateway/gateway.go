// Package gateway answers ask_autonomy_ladder(step) — seed 000's Gateway
// procedure — across every workspace a gateway file holds a key for: it
// finds the workspace whose queue holds the step (by id, then plain name
// case- and punctuation-insensitively, then containment, then the file's
// alias table), asks that workspace's MCP endpoint for the step's evidence,
// and answers with the lane, why and the rolling four-week accuracy. An
// unknown step gets the nearest names across all workspaces; a step that
// matches in two workspaces is named in both, never picked silently; and a
// workspace that is down or refuses its key is named while the others
// still answer.
//
// It asks each workspace through ladder.StepReader (client.MCP dials it)
// and matches names with ladder.MatchStep, so it depends on the root
// package and the client only, never on the service, the gate's CEL engine
// or a store (the root's TestLayering fails if it does).
package gateway

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/client"
)

// DefaultTimeout bounds each workspace's calls when neither the file nor
// the options give a timeout.
const DefaultTimeout = 10 * time.Second

// AccuracyMeaning is how the answer describes figures.rolling_4.accuracy
// (seed 000).
const AccuracyMeaning = "how often the agent agreed with the person over the last four weeks"

// Statuses of an Answer.
const (
	StatusFound       = "found"       // one step matched; lane, why and accuracy are filled
	StatusAmbiguous   = "ambiguous"   // several steps matched; Candidates names them
	StatusNotFound    = "not_found"   // nothing matched; Nearest offers names
	StatusUnavailable = "unavailable" // no workspace that could hold the step answered
)

// Options configure a Gateway.
type Options struct {
	// Getenv reads the environment variables named by key_env (nil reads
	// none: such workspaces answer KEY_MISSING).
	Getenv func(string) string
	// Timeout bounds each workspace's calls; zero means the file's timeout,
	// then DefaultTimeout.
	Timeout time.Duration
	// HTTPClient carries the MCP requests (nil: http.DefaultTransport).
	HTTPClient *http.Client
	// Version is sent to the servers as the client version.
	Version string
}

// Gateway asks the workspaces of one gateway file.
type Gateway struct {
	file    *File
	opts    Options
	timeout time.Duration
	names   []string // workspace names, sorted
}

// New returns a gateway over the file's workspaces.
func New(f *File, opts Options) *Gateway {
	t := opts.Timeout
	if t <= 0 {
		t = time.Duration(f.Timeout)
	}
	if t <= 0 {
		t = DefaultTimeout
	}
	return &Gateway{file: f, opts: opts, timeout: t, names: sortedKeys(f.Workspaces)}
}

// Workspaces returns the names of the workspaces the gateway asks.
func (g *Gateway) Workspaces() []string { return append([]string(nil), g.names...) }

// Answer is the answer to ask_autonomy_ladder(step).
type Answer struct {
	// Query is the step name as asked.
	Query string `json:"query"`
	// Status is found, ambiguous, not_found or unavailable.
	Status string `json:"status"`
	// Answer is the answer in sentences, for a person or a model.
	Answer string `json:"answer"`
	// Workspace, Queue, Step and Name identify the step found.
	Workspace string `json:"workspace,omitempty"`
	Queue     string `json:"queue,omitempty"`
	Step      string `json:"step,omitempty"`
	Name      string `json:"name,omitempty"`
	// MatchedBy is how the query found the step: id, name, containment or
	// alias.
	MatchedBy string `json:"matched_by,omitempty"`
	// Alias is the stand-in name of the alias table that led to the step.
	Alias string `json:"alias,omitempty"`
	// Lane is the step's lane: human_only, shadow, propose or auto.
	Lane string `json:"lane,omitempty"`
	// Why says why the step is in its lane.
	Why string `json:"why,omitempty"`
	// Rolling4 is figures.rolling_4 of the evidence pack.
	Rolling4 *Rolling4 `json:"rolling_4,omitempty"`
	// Evidence is the URL of the step's evidence pack (REST).
	Evidence string `json:"evidence,omitempty"`
	// Candidates are the steps an ambiguous query matched.
	Candidates []StepRef `json:"candidates,omitempty"`
	// Nearest are the closest step names when nothing matched.
	Nearest []StepRef `json:"nearest,omitempty"`
	// Unavailable are the workspaces that could not be asked.
	Unavailable []Unavailable `json:"unavailable,omitempty"`
}

// Rolling4 is the step's last-four-weeks window.
type Rolling4 struct {
	// Accuracy is how often the agent agreed with the person over the last
	// four weeks; nil when there were no reviews.
	Accuracy    *float64 `json:"accuracy"`
	Meaning     string   `json:"meaning"`
	N           int      `json:"n"`
	Agreements  int      `json:"agreements"`
	WilsonLower float64  `json:"wilson_lower"`
	WilsonUpper float64  `json:"wilson_upper"`
}

// StepRef names a step in a workspace, with its lane.
type StepRef struct {
	Workspace          string   `json:"workspace"`
	Queue              string   `json:"queue"`
	Step               string   `json:"step"`
	Name               string   `json:"name"`
	Lane               string   `json:"lane"`
	Last4WeeksAccuracy *float64 `json:"last_4_weeks_accuracy"`
}

// Unavailable names a workspace that could not be asked and why.
type Unavailable struct {
	Workspace string      `json:"workspace"`
	Code      ladder.Code `json:"code"`
	Message   string      `json:"message"`
}

// session is what the gateway asks of one workspace: its steps and a
// step's evidence, the reading half of the ladder's service. *client.MCP
// is the one it dials.
type session interface {
	ladder.StepReader
	Close() error
}

// conn is one workspace's session and step list within one Ask.
type conn struct {
	name  string
	sess  session
	steps ladder.StepsView
	err   *ladder.Error
}

// located is a step of the combined list, with its workspace.
type located struct {
	ws  string
	sum ladder.StepSummary
}

// Ask runs seed 000's procedure for one step name. It returns an error only
// for an empty step; every other outcome is an Answer.
func (g *Gateway) Ask(ctx context.Context, step string) (Answer, error) {
	step = strings.TrimSpace(step)
	if step == "" {
		return Answer{}, ladder.InvalidField("step", "The step field is required.", "give a step id (post_tms) or its plain name (Post to the TMS)")
	}
	ans := Answer{Query: step}
	conns := g.connectAll(ctx)
	defer func() {
		for _, c := range conns {
			if c.sess != nil {
				c.sess.Close()
			}
		}
	}()
	var all []located
	var steps []ladder.Step
	for _, c := range conns {
		if c.err != nil {
			ans.Unavailable = append(ans.Unavailable, Unavailable{Workspace: c.name, Code: c.err.Code, Message: c.err.Message})
			continue
		}
		for _, s := range c.steps.Steps {
			// Queue carries the index into all, so a match maps back to
			// its workspace even when two workspaces declare equal steps.
			steps = append(steps, ladder.Step{ID: s.Step, Name: s.Name, Queue: strconv.Itoa(len(all))})
			all = append(all, located{ws: c.name, sum: s})
		}
	}
	if len(ans.Unavailable) == len(conns) {
		ans.Status = StatusUnavailable
		ans.Answer = fmt.Sprintf("No workspace could be asked about %q.%s", step, unavailableSentence(ans.Unavailable))
		return ans, nil
	}

	matches, by, alias := g.match(steps, step)
	ans.MatchedBy, ans.Alias = by, alias
	var found []located
	for _, m := range matches {
		i, _ := strconv.Atoi(m.Queue)
		found = append(found, all[i])
	}
	switch {
	case len(found) == 0:
		return g.notFound(ans, steps, all, ""), nil
	case len(found) > 1:
		ans.Status = StatusAmbiguous
		wss := map[string]bool{}
		var names []string
		for _, f := range found {
			ans.Candidates = append(ans.Candidates, ref(f))
			wss[f.ws] = true
			names = append(names, fmt.Sprintf("%s (%s, %s)", f.sum.Name, f.ws, f.sum.Lane))
		}
		where := "one workspace"
		if len(wss) > 1 {
			where = fmt.Sprintf("%d workspaces", len(wss))
		}
		ans.Answer = fmt.Sprintf("%q matches %d steps in %s: %s. Ask again with one of these names; no step was picked.%s",
			step, len(found), where, strings.Join(names, "; "), unavailableSentence(ans.Unavailable))
		return ans, nil
	}

	f := found[0]
	var c *conn
	for _, cc := range conns {
		if cc.name == f.ws {
			c = cc
		}
	}
	ans.Workspace, ans.Queue, ans.Step, ans.Name, ans.Evidence = f.ws, f.sum.Queue, f.sum.Step, f.sum.Name, f.sum.Evidence
	queue := ""
	for _, s := range c.steps.Steps {
		if s.Name == f.sum.Name && s.Queue != f.sum.Queue {
			queue = f.sum.Queue // the name alone is ambiguous in this workspace
		}
	}
	cctx, cancel := context.WithTimeout(ctx, g.timeout)
	pack, err := c.sess.Evidence(cctx, queue, f.sum.Name)
	cancel()
	if err != nil {
		e := ladder.AsError(err)
		if client.IsToolError(err) {
			// The step went away between the two calls: offer names.
			return g.notFound(ans, steps, all, e.Message), nil
		}
		ans.Status = StatusUnavailable
		ans.Unavailable = append(ans.Unavailable, Unavailable{Workspace: f.ws, Code: e.Code, Message: e.Message})
		ans.Answer = fmt.Sprintf("%s is a step of %s, but %s did not give its evidence.%s", f.sum.Name, f.ws, f.ws, unavailableSentence(ans.Unavailable))
		return ans, nil
	}
	ans.Status = StatusFound
	ans.Lane, ans.Why = string(pack.Lane), pack.Why
	r4 := pack.Figures.Rolling4
	ans.Rolling4 = &Rolling4{Accuracy: r4.Accuracy, Meaning: AccuracyMeaning, N: r4.N, Agreements: r4.Agreements, WilsonLower: r4.WilsonLower, WilsonUpper: r4.WilsonUpper}
	ans.Answer = foundSentence(ans)
	return ans, nil
}

// connectAll opens a session with every workspace at once and lists its
// steps, each bounded by the timeout.
func (g *Gateway) connectAll(ctx context.Context) []*conn {
	conns := make([]*conn, len(g.names))
	var wg sync.WaitGroup
	for i, name := range g.names {
		c := &conn{name: name}
		conns[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.sess, c.steps, c.err = g.connect(ctx, name)
		}()
	}
	wg.Wait()
	return conns
}

func (g *Gateway) connect(ctx context.Context, name string) (session, ladder.StepsView, *ladder.Error) {
	w := g.file.Workspaces[name]
	key := w.Key
	if w.KeyEnv != "" {
		if g.opts.Getenv != nil {
			key = g.opts.Getenv(w.KeyEnv)
		}
		if key == "" {
			return nil, ladder.StepsView{}, &ladder.Error{Code: ladder.CodeKeyMissing, Message: fmt.Sprintf("The environment variable %s (key_env of %s) is not set.", w.KeyEnv, name)}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	// The HTTP client's own timeout also bounds requests the SDK sends
	// outside the call's context (such as a cancellation notice).
	hc := &http.Client{}
	if g.opts.HTTPClient != nil {
		c := *g.opts.HTTPClient
		hc = &c
	}
	if hc.Timeout <= 0 || hc.Timeout > g.timeout {
		hc.Timeout = g.timeout
	}
	m, err := client.ConnectMCP(ctx, w.Server, key, &client.MCPOptions{HTTPClient: hc, Name: "ladder-gateway", Version: g.opts.Version})
	if err != nil {
		return nil, ladder.StepsView{}, ladder.AsError(err)
	}
	v, err := m.Steps(ctx, "")
	if err != nil {
		m.Close()
		return nil, ladder.StepsView{}, ladder.AsError(err)
	}
	return m, v, nil
}

// match applies id, name, containment (ladder.MatchStep over every
// workspace's steps at once, so an exact name in one workspace beats a
// containment in another) and then the alias table.
func (g *Gateway) match(steps []ladder.Step, query string) (matches []ladder.Step, by, alias string) {
	if m := ladder.MatchStep(steps, query); len(m) > 0 {
		return m, matchedBy(m[0], query), ""
	}
	if len(g.file.Aliases) == 0 {
		return nil, "", ""
	}
	froms := sortedKeys(g.file.Aliases)
	keys := make([]ladder.Step, len(froms))
	for i, from := range froms {
		keys[i] = ladder.Step{ID: from, Name: from}
	}
	seen := map[string]bool{}
	var used []string
	for _, a := range ladder.MatchStep(keys, query) {
		used = append(used, a.Name)
		for _, m := range ladder.MatchStep(steps, g.file.Aliases[a.Name]) {
			if !seen[m.Queue] {
				seen[m.Queue] = true
				matches = append(matches, m)
			}
		}
	}
	if len(matches) == 0 {
		return nil, "", ""
	}
	return matches, "alias", strings.Join(used, "; ")
}

// matchedBy names the rule that matched st.
func matchedBy(st ladder.Step, query string) string {
	switch {
	case st.ID == query:
		return "id"
	case ladder.FoldName(st.Name) == ladder.FoldName(query) || ladder.FoldName(st.ID) == ladder.FoldName(query):
		return "name"
	default:
		return "containment"
	}
}

// notFound fills a not_found answer with the nearest names over every
// workspace that answered.
func (g *Gateway) notFound(ans Answer, steps []ladder.Step, all []located, serverSaid string) Answer {
	ans.Status = StatusNotFound
	ans.MatchedBy, ans.Alias = "", ""
	ans.Workspace, ans.Queue, ans.Step, ans.Name, ans.Evidence = "", "", "", "", ""
	// The alias table's stand-in names are candidates too, offered as the
	// live steps they stand for.
	cands := append([]ladder.Step(nil), steps...)
	for _, from := range sortedKeys(g.file.Aliases) {
		cands = append(cands, ladder.Step{ID: from, Name: from, Queue: "alias"})
	}
	used := map[int]bool{}
	var names []string
	for _, n := range ladder.NearestSteps(cands, ans.Query, 3) {
		if to, ok := g.file.Aliases[n]; ok {
			for _, m := range ladder.MatchStep(steps, to) {
				i, _ := strconv.Atoi(m.Queue)
				if !used[i] {
					used[i] = true
					ans.Nearest = append(ans.Nearest, ref(all[i]))
					names = append(names, fmt.Sprintf("%s (%s; alias %q)", all[i].sum.Name, all[i].ws, n))
				}
			}
			continue
		}
		for i, l := range all {
			if l.sum.Name == n && !used[i] {
				used[i] = true
				ans.Nearest = append(ans.Nearest, ref(l))
				names = append(names, fmt.Sprintf("%s (%s)", n, l.ws))
				break
			}
		}
	}
	var b strings.Builder
	if serverSaid != "" {
		fmt.Fprintf(&b, "%s ", strings.TrimSpace(serverSaid))
	} else {
		fmt.Fprintf(&b, "No step matches %q in any workspace. ", ans.Query)
	}
	if len(names) > 0 {
		fmt.Fprintf(&b, "The nearest names are: %s. ", strings.Join(names, "; "))
	}
	b.WriteString("which_steps_run_alone lists every step of a workspace.")
	b.WriteString(unavailableSentence(ans.Unavailable))
	if len(ans.Unavailable) > 0 {
		b.WriteString(" The step may be in a workspace that did not answer.")
	}
	ans.Answer = b.String()
	return ans
}

func ref(l located) StepRef {
	return StepRef{Workspace: l.ws, Queue: l.sum.Queue, Step: l.sum.Step, Name: l.sum.Name, Lane: string(l.sum.Lane), Last4WeeksAccuracy: l.sum.Last4WeeksAccuracy}
}

// laneMeans says what each lane lets the agent do.
var laneMeans = map[string]string{
	string(ladder.LaneAuto):      "the agent may act alone (a sample is audited)",
	string(ladder.LanePropose):   "the agent proposes and a person approves before it acts",
	string(ladder.LaneShadow):    "a person does the work while the agent's output is compared with theirs",
	string(ladder.LaneHumanOnly): "a person does the work",
}

func foundSentence(a Answer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s, queue %s) is in %s", a.Name, a.Workspace, a.Queue, a.Lane)
	if m, ok := laneMeans[a.Lane]; ok {
		fmt.Fprintf(&b, ": %s", m)
	}
	b.WriteString(".")
	if a.Alias != "" {
		fmt.Fprintf(&b, " (%q is the alias table's name for %s.)", a.Alias, a.Name)
	}
	if a.Why != "" {
		fmt.Fprintf(&b, " Why: %s", strings.TrimSpace(a.Why))
		if !strings.HasSuffix(b.String(), ".") {
			b.WriteString(".")
		}
	}
	if r := a.Rolling4; r != nil && r.Accuracy != nil {
		fmt.Fprintf(&b, " Last four weeks: %.1f%% on %d reviews — %s.", 100**r.Accuracy, r.N, AccuracyMeaning)
	} else {
		fmt.Fprintf(&b, " Last four weeks: no reviews, so there is no figure for %s.", AccuracyMeaning)
	}
	b.WriteString(unavailableSentence(a.Unavailable))
	return b.String()
}

func unavailableSentence(us []Unavailable) string {
	if len(us) == 0 {
		return ""
	}
	sorted := append([]Unavailable(nil), us...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Workspace < sorted[j].Workspace })
	parts := make([]string, len(sorted))
	for i, u := range sorted {
		parts[i] = fmt.Sprintf("%s (%s: %s)", u.Workspace, u.Code, strings.TrimSuffix(u.Message, "."))
	}
	return " Could not ask: " + strings.Join(parts, "; ") + "."
}

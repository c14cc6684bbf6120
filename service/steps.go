package service

import (
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/ladderhq/ladder"
)

// normalize folds a step name for matching: lower case, letters and digits
// only, so "Decide hold/release" and "decide-hold release" compare equal.
func normalize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// MatchStep finds a step among steps by id, then by plain name case- and
// punctuation-insensitively, then by containment (seed 000). It returns the
// matches of the first rule that finds any: one is a match, several are
// ambiguous.
func MatchStep(steps []ladder.Step, query string) []ladder.Step {
	for _, st := range steps {
		if st.ID == query {
			return []ladder.Step{st}
		}
	}
	q := normalize(query)
	if q == "" {
		return nil
	}
	var exact, contains []ladder.Step
	for _, st := range steps {
		n, id := normalize(st.Name), normalize(st.ID)
		switch {
		case n == q || id == q:
			exact = append(exact, st)
		case strings.Contains(n, q) || strings.Contains(q, n) || strings.Contains(id, q):
			contains = append(contains, st)
		}
	}
	if len(exact) > 0 {
		return exact
	}
	return contains
}

// NearestSteps returns up to n step names closest to query by edit distance
// over the normalized names, for "did you mean" hints.
func NearestSteps(steps []ladder.Step, query string, n int) []string {
	q := normalize(query)
	type scored struct {
		name string
		d    int
	}
	var all []scored
	for _, st := range steps {
		d := min(levenshtein(q, normalize(st.Name)), levenshtein(q, normalize(st.ID)))
		// Shared words pull a name closer: "fuel surcharge" is nearer to
		// "Rate check" than its letters alone say only when words overlap.
		for _, w := range strings.Fields(strings.ToLower(query)) {
			if len(w) > 3 && strings.Contains(strings.ToLower(st.Name), w) {
				d -= len(w)
			}
		}
		all = append(all, scored{st.Name, d})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].d < all[j].d })
	var out []string
	for _, s := range all {
		if len(out) == n {
			break
		}
		out = append(out, s.name)
	}
	return out
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// Steps returns the declared steps of a workspace, optionally of one queue.
func (s *Service) Steps(workspace, queue string) []ladder.Step {
	w, ok := s.workspaces[workspace]
	if !ok {
		return nil
	}
	var out []ladder.Step
	for _, q := range w.Queues {
		if queue != "" && q.ID != queue {
			continue
		}
		for _, st := range q.Steps {
			st.Queue = q.ID
			out = append(out, st)
		}
	}
	return out
}

// FindStep resolves a step id or plain name within a workspace (and queue,
// when given). An unknown step is STEP_NOT_FOUND naming the nearest steps
// and which_steps_run_alone; an ambiguous one names the candidates.
func (s *Service) FindStep(workspace, queue, query string) (ladder.Step, error) {
	// An exact id is what agents send on every route: find it as MatchStep
	// would (the first step with that id) without copying the workspace's
	// steps.
	if w, ok := s.workspaces[workspace]; ok {
		for _, q := range w.Queues {
			if queue != "" && q.ID != queue {
				continue
			}
			for _, st := range q.Steps {
				if st.ID == query {
					st.Queue = q.ID
					return st, nil
				}
			}
		}
	}
	steps := s.Steps(workspace, queue)
	if queue != "" && len(steps) == 0 {
		var queues []string
		if w, ok := s.workspaces[workspace]; ok {
			for _, q := range w.Queues {
				queues = append(queues, q.ID)
			}
		}
		return ladder.Step{}, &ladder.Error{Code: ladder.CodeStepNotFound, Message: fmt.Sprintf("No queue %q in this workspace.", queue),
			Hint: "leave queue out, or use one of: " + strings.Join(queues, ", "), Data: map[string]any{"field": "queue"}}
	}
	if strings.TrimSpace(query) == "" {
		return ladder.Step{}, ladder.InvalidField("step", "The step field is required.", "give a step id (post_tms) or its plain name (Post to the TMS); which_steps_run_alone lists them")
	}
	m := MatchStep(steps, query)
	switch len(m) {
	case 1:
		return m[0], nil
	case 0:
		near := NearestSteps(steps, query, 3)
		return ladder.Step{}, &ladder.Error{Code: ladder.CodeStepNotFound,
			Message: fmt.Sprintf("No step matches %q. Call which_steps_run_alone to list the steps; the nearest are: %s.", query, strings.Join(near, "; ")),
			Hint:    "call which_steps_run_alone (GET /v1/steps) to list every step; nearest: " + strings.Join(near, "; "),
			Data:    map[string]any{"nearest": near}}
	default:
		names := make([]string, len(m))
		for i, st := range m {
			names[i] = st.Name + " (" + st.ID + ")"
		}
		return ladder.Step{}, &ladder.Error{Code: ladder.CodeStepNotFound,
			Message: fmt.Sprintf("The name %q matches %d steps: %s. Name one exactly.", query, len(m), strings.Join(names, "; ")),
			Hint:    "use the step id", Data: map[string]any{"candidates": names}}
	}
}

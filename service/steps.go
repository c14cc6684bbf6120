package service

import (
	"fmt"
	"strings"

	"github.com/ladderhq/ladder"
)

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
		return ladder.Step{}, ladder.InvalidField("step", "The step field is required.", "give a step id (post_tms) or its plain name (Post to the TMS); {{steps}} lists them")
	}
	m := ladder.MatchStep(steps, query)
	switch len(m) {
	case 1:
		return m[0], nil
	case 0:
		near := ladder.NearestSteps(steps, query, 3)
		return ladder.Step{}, &ladder.Error{Code: ladder.CodeStepNotFound,
			Message: fmt.Sprintf("No step matches %q; {{steps}} lists the steps, and the nearest are: %s.", query, strings.Join(near, "; ")),
			Hint:    "{{steps}} lists every step; nearest: " + strings.Join(near, "; "),
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

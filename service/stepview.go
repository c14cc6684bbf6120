package service

import "github.com/ladderhq/ladder"

// stepView holds the step states this process last saw, so a route is
// decided without a read of the store. It is only a hint: the store
// records a route only while the step's state at commit has the lane
// epoch and audit rate the decision used (RecordRoute), and a refused
// route drops the entry and is decided again from the store. Entries are
// filled on first use, replaced by the states this process writes and
// reads, and dropped when the store says a step changed (StepChanged), so
// another replica's change is usually seen before a commit has to refuse.
type stepView = hintView[ladder.StepKey, ladder.StepState]

func newStepView() *stepView {
	return newHintView(func(st ladder.StepState) ladder.StepKey {
		return ladder.StepKey{Workspace: st.Workspace, Queue: st.Queue, Step: st.Step}
	}, func(cur, next ladder.StepState) bool { return cur.Version > next.Version })
}

// StepChanged tells the service that a step's state changed in the store,
// by this replica or another (the store's change notifications): its view
// of the step is dropped, so the next route reads the state. The zero key
// drops every step (changes may have been missed). Routes do not depend on
// it for correctness — the store re-checks each one at commit — but without
// it a route after another replica's change is decided twice.
func (s *Service) StepChanged(k ladder.StepKey) { s.steps.drop(k) }

package service

import (
	"sync"

	"github.com/ladderhq/ladder"
)

// stepView holds the step states this process last saw, so a route is
// decided without a read of the store. It is only a hint: the store
// records a route only while the step's state at commit has the lane
// epoch and audit rate the decision used (RecordRoute), and a refused
// route drops the entry and is decided again from the store. Entries are
// filled on first use, replaced by the states this process writes and
// reads, and dropped when the store says a step changed (StepChanged), so
// another replica's change is usually seen before a commit has to refuse.
type stepView struct {
	mu     sync.RWMutex
	states map[ladder.StepKey]ladder.StepState
	// gen counts drops: a state read from the store before a drop may be
	// older than the change the drop was for, so it is not kept.
	gen uint64
}

func newStepView() *stepView {
	return &stepView{states: map[ladder.StepKey]ladder.StepState{}}
}

// get returns the view's state of k, if any, and the generation to pass
// to fill with a state read from the store after this call.
func (v *stepView) get(k ladder.StepKey) (ladder.StepState, bool, uint64) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	st, ok := v.states[k]
	return st, ok, v.gen
}

// fill keeps st, read from the store after a get that returned gen, unless
// a drop came in between or the view holds a later version already.
func (v *stepView) fill(st ladder.StepState, gen uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.gen != gen {
		return
	}
	v.keep(st)
}

// wrote keeps st, a state this process has just committed.
func (v *stepView) wrote(st ladder.StepState) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.keep(st)
}

func (v *stepView) keep(st ladder.StepState) {
	k := ladder.StepKey{Workspace: st.Workspace, Queue: st.Queue, Step: st.Step}
	if cur, ok := v.states[k]; ok && cur.Version > st.Version {
		return
	}
	v.states[k] = st
}

// drop forgets k's state; the zero key forgets every state.
func (v *stepView) drop(k ladder.StepKey) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.gen++
	if k == (ladder.StepKey{}) {
		clear(v.states)
		return
	}
	delete(v.states, k)
}

// StepChanged tells the service that a step's state changed in the store,
// by this replica or another (the store's change notifications): its view
// of the step is dropped, so the next route reads the state. The zero key
// drops every step (changes may have been missed). Routes do not depend on
// it for correctness — the store re-checks each one at commit — but without
// it a route after another replica's change is decided twice.
func (s *Service) StepChanged(k ladder.StepKey) { s.steps.drop(k) }

package service

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
)

// TestStepView: a state read before a drop is not kept after it (it may be
// older than the change the drop was for), a later version is not replaced
// by an earlier one, and the zero key drops every step.
func TestStepView(t *testing.T) {
	k := ladder.StepKey{Workspace: "w", Queue: "q", Step: "s"}
	other := ladder.StepKey{Workspace: "w", Queue: "q", Step: "t"}
	state := func(k ladder.StepKey, version int64, lane ladder.Lane) ladder.StepState {
		return ladder.StepState{Workspace: k.Workspace, Queue: k.Queue, Step: k.Step, Lane: lane, Version: version}
	}
	v := newStepView()
	has := func(k ladder.StepKey) (ladder.StepState, bool) {
		st, ok, _ := v.get(k)
		return st, ok
	}

	_, _, gen := v.get(k)
	v.drop(k) // a change lands while the read is in flight
	v.fill(state(k, 1, ladder.LaneAuto), gen)
	if _, ok := has(k); ok {
		t.Error("a state read before a drop was kept")
	}

	_, _, gen = v.get(k)
	v.fill(state(k, 1, ladder.LaneAuto), gen)
	v.wrote(state(k, 3, ladder.LanePropose))
	_, _, gen = v.get(k)
	v.fill(state(k, 2, ladder.LaneAuto), gen) // a slow read of an earlier version
	if diff := cmp.Diff(state(k, 3, ladder.LanePropose), viewed(has(k))); diff != "" {
		t.Errorf("after an earlier version came in (-want +got):\n%s", diff)
	}

	v.wrote(state(other, 1, ladder.LaneShadow))
	v.drop(k)
	if _, ok := has(k); ok {
		t.Error("drop(k) kept k")
	}
	if _, ok := has(other); !ok {
		t.Error("drop(k) dropped another step")
	}
	v.drop(ladder.StepKey{})
	if _, ok := has(other); ok {
		t.Error("the zero key kept a step")
	}
}

// viewed is the state has returned, or the zero state when it had none.
func viewed(st ladder.StepState, ok bool) ladder.StepState {
	if !ok {
		return ladder.StepState{}
	}
	return st
}

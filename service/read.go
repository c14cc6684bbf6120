package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/ladderhq/ladder"
)

// The reads below are what the surfaces (console, MCP, demo) need from the
// store, scoped to the caller's workspace here, once, so no surface reaches
// around the service to the store.

// EnsureSteps stores the state of every step that has none yet (the demo
// stores its steps as their history starts them, before the history is
// imported); existing states are kept.
func (s *Service) EnsureSteps(ctx context.Context, states []ladder.StepState) error {
	return storeErr("ensure steps", s.store.EnsureSteps(ctx, states))
}

// StepStates returns the live state of every step of a workspace.
func (s *Service) StepStates(ctx context.Context, workspace string) ([]ladder.StepState, error) {
	states, err := s.store.ListStepStates(ctx, workspace)
	if err != nil {
		return nil, storeErr("list step states", err)
	}
	return states, nil
}

// StepState returns the live state of one step of the caller's workspace.
func (s *Service) StepState(ctx context.Context, p ladder.Principal, queue, step string) (ladder.StepState, error) {
	st, err := s.FindStep(p.Workspace, queue, step)
	if err != nil {
		return ladder.StepState{}, err
	}
	state, err := s.store.GetStepState(ctx, ladder.StepKey{Workspace: p.Workspace, Queue: st.Queue, Step: st.ID})
	if err != nil {
		return ladder.StepState{}, storeErr("get step state", err)
	}
	return state, nil
}

// StepReviews returns up to limit reviews of one step of the caller's
// workspace, newest first.
func (s *Service) StepReviews(ctx context.Context, p ladder.Principal, queue, step string, limit int) ([]ladder.Review, error) {
	st, err := s.FindStep(p.Workspace, queue, step)
	if err != nil {
		return nil, err
	}
	rows, err := s.store.Reviews(ctx, ladder.ReviewQuery{Key: ladder.StepKey{Workspace: p.Workspace, Queue: st.Queue, Step: st.ID}, Limit: limit})
	if err != nil {
		return nil, storeErr("list reviews", err)
	}
	return rows, nil
}

// GetRoute returns a route of the caller's workspace; another workspace's
// id is ROUTE_NOT_FOUND, the same as an id that exists nowhere.
func (s *Service) GetRoute(ctx context.Context, p ladder.Principal, id string) (ladder.Route, error) {
	rt, err := s.store.GetRoute(ctx, p.Workspace, id)
	if errors.Is(err, ladder.ErrNotFound) {
		return ladder.Route{}, ladder.NotFound(ladder.CodeRouteNotFound, fmt.Sprintf("No route %q in this workspace.", id),
			"use the route_id a route answer gave")
	}
	if err != nil {
		return ladder.Route{}, storeErr("get route", err)
	}
	return rt, nil
}

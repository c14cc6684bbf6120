package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/ladderhq/ladder"
)

// DefaultMaxPendingPerKey caps the approvals one key may have waiting for a
// person; a call that would create one more is refused with RATE_LIMITED.
const DefaultMaxPendingPerKey = 100

// DefaultMaxShadowPerStep caps the shadow proposals one key may have stored
// for one step whose routes no person has reviewed yet; over it, a call is
// still refused with STEP_NEEDS_PERSON but its proposal is not stored.
const DefaultMaxShadowPerStep = 1000

// limiters holds one token bucket per key id. It only ever holds keys that
// authenticated, so it grows with the key table, not with hostile input.
type limiters struct {
	perSecond float64
	burst     int
	mu        sync.Mutex
	m         map[string]*rate.Limiter
}

func (l *limiters) get(keyID string) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*rate.Limiter{}
	}
	lim, ok := l.m[keyID]
	if !ok {
		lim = rate.NewLimiter(rate.Limit(l.perSecond), l.burst)
		l.m[keyID] = lim
	}
	return lim
}

// Admit takes one token from the key's bucket (server.rate_limit) and
// refuses with RATE_LIMITED, naming the seconds to wait in
// data.retry_after_seconds, when the bucket is empty. Every surface calls it
// right after authenticating a key. A zero rate turns the limit off.
func (s *Service) Admit(p ladder.Principal) error {
	if s.limits.perSecond <= 0 || p.KeyID == "" {
		return nil
	}
	now := time.Now() // wall clock: a bucket refills in real time
	r := s.limits.get(p.KeyID).ReserveN(now, 1)
	if !r.OK() {
		return rateLimited(1, "This key sends more requests than the rate limit allows.")
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return rateLimited(int(math.Ceil(d.Seconds())), "This key sends more requests than the rate limit allows.")
	}
	return nil
}

func rateLimited(seconds int, msg string) *ladder.Error {
	if seconds < 1 {
		seconds = 1
	}
	return &ladder.Error{Code: ladder.CodeRateLimited, Message: msg,
		Hint: fmt.Sprintf("wait %d s (the Retry-After header, or data.retry_after_seconds over MCP) and send again; nothing was done", seconds),
		Data: map[string]any{"retry_after_seconds": seconds}}
}

// shadowNotRecorded is the refusal of a call to a step in shadow whose
// proposal the store did not keep (err): its key has the most unreviewed
// shadow proposals of the step it may keep (ErrTooManyShadow), or a person
// reviewed the item's route already (ErrRouteReviewed). Nothing runs either
// way; only the comparison record is missing, which the log and
// ShadowProposalsDropped count.
func (s *Service) shadowNotRecorded(ctx context.Context, p ladder.Principal, rt ladder.Route, err error) error {
	s.shadowDropped.Add(1)
	data := map[string]any{"route_id": rt.ID, "lane": rt.Lane, "proposal_recorded": false}
	why := "the route was reviewed already"
	hint := fmt.Sprintf("%s is in shadow: a person does this work; do not act. Your proposal was not recorded: a person handled and reviewed this item already, so there is nothing left to compare it with", rt.Step)
	if errors.Is(err, ladder.ErrTooManyShadow) {
		why = "the key is at its cap of unreviewed shadow proposals for the step"
		hint = fmt.Sprintf("%s is in shadow: a person does this work; do not act. Your proposal was not recorded: this key has %d unreviewed shadow proposals of this step, the most it may keep, and more are recorded only once people review the oldest ones", rt.Step, s.maxShadow)
		data["max_shadow"] = s.maxShadow
	}
	s.log.WarnContext(ctx, "shadow proposal not recorded: "+why,
		"workspace", p.Workspace, "key_id", p.KeyID, "queue", rt.Queue, "step", rt.Step, "route_id", rt.ID, "max_shadow", s.maxShadow)
	return &ladder.Error{Code: ladder.CodeStepNeedsPerson, Message: "The step is in shadow, so a person does this work and nothing ran.", Hint: hint, Data: data}
}

// ShadowProposalsDropped counts the shadow proposals this process did not
// store because their key was at its cap for the step (a metric reads it).
func (s *Service) ShadowProposalsDropped() uint64 { return s.shadowDropped.Load() }

// tooManyPending is the refusal of a call that would add one more pending
// approval to the n its key has, at or over the cap.
func (s *Service) tooManyPending(n int) *ladder.Error {
	return &ladder.Error{Code: ladder.CodeRateLimited, Message: fmt.Sprintf("This key has %d approvals waiting for a person, the most it may have.", s.maxPending),
		Hint: "nothing was done and no approval was created; wait until people decide the pending ones ({{approval_status}} tells you), then call again",
		Data: map[string]any{"retry_after_seconds": 60, "pending": n, "max_pending": s.maxPending}}
}

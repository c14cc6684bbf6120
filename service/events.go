package service

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/ladderhq/ladder"
)

// The events a write reports ride on its audit entry (ladder.AuditEntry's
// Event), so the store writes them in the write's transaction. These
// helpers build the ones that need the service's view.

// decision names a person's approval: edited when the payload changed.
func decision(edited bool) string {
	if edited {
		return "edited"
	}
	return "approved"
}

// executionFailed is the approval.execution_failed event of an approved
// call's outcome, or nil when it ran, or when nothing ran and the approval
// went back to pending (a person may approve again).
func executionFailed(b ladder.Approval, now time.Time) *ladder.Event {
	if b.ExecError == "" || b.Status != ladder.ApprovalApproved {
		return nil
	}
	code, _, _ := strings.Cut(b.ExecError, ":")
	return ladder.ApprovalExecutionFailedEvent(b, code, now)
}

// stepLane is the lane of an approval's step now, or "" when the approval
// is not tied to a step or its state cannot be read (the event then says
// what the approval's kind implies).
func (s *Service) stepLane(ctx context.Context, a ladder.Approval) ladder.Lane {
	if a.Step == "" {
		return ""
	}
	st, err := s.store.GetStepState(ctx, ladder.StepKey{Workspace: a.Workspace, Queue: a.Queue, Step: a.Step})
	if err != nil {
		return ""
	}
	return st.Lane
}

// reportOutage records, once durable writes work again, that they failed
// from since until now: one audit record and audit.unavailable event per
// workspace. It could not be written during the outage (the outbox is in
// the same database); a failure now is logged and dropped.
func (s *Service) reportOutage(since time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := ladder.NormTime(s.now())
	var entries []ladder.AuditEntry
	for _, ws := range s.order {
		e, err := ladder.NewAuditEntry(ws, "system", ladder.AuditOutage, "outage", now, map[string]any{"since": ladder.NormTime(since), "until": now})
		if err != nil {
			s.log.Warn("record audit outage", "err", err)
			return
		}
		e.Event = ladder.AuditUnavailableEvent(ws, since, now)
		entries = append(entries, e)
	}
	if _, err := s.store.AppendAudit(ctx, entries...); err != nil {
		s.log.Warn("record audit outage", "err", err)
	}
}

// ApprovalMessage is what a chat message asking for approval id of a
// workspace shows beyond its event: the proposal (the payload as edited,
// if it was) and, for a step-tied approval, the step's figures in one
// sentence. What cannot be read is left out.
func (s *Service) ApprovalMessage(ctx context.Context, workspace, id string) (json.RawMessage, string) {
	a, err := s.store.GetApproval(ctx, workspace, id)
	if err != nil {
		return nil, ""
	}
	var figures string
	if a.Step != "" {
		if pack, err := s.Evidence(ctx, workspace, a.Queue, a.Step); err == nil {
			figures = pack.Sentence
		}
	}
	return a.Payload, figures
}

// DecideFromChat approves or rejects approval id as p, a person a chat
// user was mapped to, through the same exactly-once path as the console.
func (s *Service) DecideFromChat(ctx context.Context, p ladder.Principal, id, action string) (ladder.ApprovalView, error) {
	if action == "reject" {
		return s.Reject(ctx, p, id, ladder.DecideRequest{Reason: "Rejected from Slack by " + strings.TrimPrefix(p.KeyID, "slack:") + "."})
	}
	return s.Approve(ctx, p, id, ladder.DecideRequest{})
}

// ObserveLaneChanges sets f to hear of each lane change (pins included)
// this replica commits, for the metrics. Set it before serving.
func (s *Service) ObserveLaneChanges(f func(ladder.LaneChange)) { s.onLaneChange = f }

func (s *Service) laneChanged(c *ladder.LaneChange) {
	if c != nil && s.onLaneChange != nil {
		s.onLaneChange(*c)
	}
}

// OldestPendingApproval is how long the oldest approval pending at the
// last ExpireDue (once a minute under serve) has waited, or 0 when none
// was.
func (s *Service) OldestPendingApproval() time.Duration {
	ns := s.oldestPending.Load()
	if ns == 0 {
		return 0
	}
	return s.now().Sub(time.Unix(0, ns))
}

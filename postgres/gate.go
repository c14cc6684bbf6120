package postgres

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/ladderhq/ladder"
)

const gateColumns = "seq, id, workspace, key_id, case_id, precondition_fn, action_id, gate_state, reason_code, r, c, o, ro, q, repair_attempts, verifiable_ext, human_readable, notes, evidence, at, payload_sha256"

// RecordGateDecision stores a gate decision and queues its audit entry in
// the same transaction; the decision's Seq comes from the table.
func (s *Store) RecordGateDecision(ctx context.Context, d ladder.GateDecisionRecord, audit ladder.AuditEntry) (ladder.GateDecisionRecord, error) {
	d, err := d.Resolved(s.now())
	if err != nil {
		return ladder.GateDecisionRecord{}, fmt.Errorf("record gate decision: %w", err)
	}
	var seq int64
	err = s.write(ctx, func(w *wtx) error {
		if err := w.queryRow(`INSERT INTO gate_decisions (`+gateColumns[len("seq, "):]+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20) RETURNING seq`,
			d.ID, d.Workspace, d.KeyID, d.Case, d.PreconditionFn, d.ActionID, d.GateState, d.ReasonCode,
			d.R, d.C, d.O, d.Ro, d.Q, d.RepairAttempts, d.VerifiableExt, d.HumanReadable, d.Notes,
			nullBytes(d.Evidence), d.At, d.PayloadSHA256).Scan(&seq); err != nil {
			return err
		}
		return w.appendAudit(nil, audit)
	})
	if err != nil {
		return ladder.GateDecisionRecord{}, fmt.Errorf("record gate decision: %w", err)
	}
	d.Seq = seq
	return d, nil
}

// GateHistory returns a workspace's gate decisions matching q, newest first.
func (s *Store) GateHistory(ctx context.Context, q ladder.GateHistoryQuery) ([]ladder.GateDecisionRecord, error) {
	if err := s.reading(); err != nil {
		return nil, fmt.Errorf("gate history: %w", err)
	}
	limit := ladder.PageLimit(q.Limit)
	query := `SELECT ` + gateColumns + ` FROM gate_decisions WHERE workspace = $1`
	args := []any{q.Workspace}
	add := func(cond string, v any) {
		args = append(args, v)
		query += " AND " + cond + " $" + strconv.Itoa(len(args))
	}
	if q.Case != "" {
		add("case_id =", q.Case)
	}
	if q.PreconditionFn != "" {
		add("precondition_fn =", q.PreconditionFn)
	}
	if q.ActionID != "" {
		add("action_id =", q.ActionID)
	}
	if q.GateState != "" {
		add("gate_state =", q.GateState)
	}
	if !q.Since.IsZero() {
		add("at >=", normTime(q.Since))
	}
	if !q.Until.IsZero() {
		add("at <", normTime(q.Until))
	}
	if q.BeforeSeq > 0 {
		add("seq <", q.BeforeSeq)
	}
	args = append(args, limit)
	query += " ORDER BY seq DESC LIMIT $" + strconv.Itoa(len(args))
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("gate history: %w", s.mapErr(err))
	}
	out, err := collect(rows, scanGateDecision)
	if err != nil {
		return nil, fmt.Errorf("gate history: %w", s.mapErr(err))
	}
	return out, nil
}

func scanGateDecision(r pgx.Row) (ladder.GateDecisionRecord, error) {
	var (
		d        ladder.GateDecisionRecord
		evidence []byte
	)
	if err := r.Scan(&d.Seq, &d.ID, &d.Workspace, &d.KeyID, &d.Case, &d.PreconditionFn, &d.ActionID, &d.GateState, &d.ReasonCode,
		&d.R, &d.C, &d.O, &d.Ro, &d.Q, &d.RepairAttempts, &d.VerifiableExt, &d.HumanReadable, &d.Notes, &evidence, &d.At, &d.PayloadSHA256); err != nil {
		return ladder.GateDecisionRecord{}, err
	}
	d.At = d.At.UTC()
	if len(evidence) > 0 {
		d.Evidence = evidence
	}
	return d, nil
}

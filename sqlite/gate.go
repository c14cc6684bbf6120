package sqlite

import (
	"context"
	"fmt"

	"github.com/ladderhq/ladder"
)

const gateColumns = "seq, id, workspace, key_id, case_id, precondition_fn, action_id, gate_state, reason_code, r, c, o, ro, q, repair_attempts, verifiable_ext, human_readable, notes, evidence, at, payload_sha256"

// RecordGateDecision stores a gate decision and appends its audit entry in
// the same transaction; the decision's Seq comes from the table.
func (s *Store) RecordGateDecision(ctx context.Context, d ladder.GateDecisionRecord, audit ladder.AuditEntry) (ladder.GateDecisionRecord, error) {
	d, err := d.Resolved(s.now())
	if err != nil {
		return ladder.GateDecisionRecord{}, fmt.Errorf("record gate decision: %w", err)
	}
	err = s.write(ctx, func(w *wtx) error {
		res, err := w.exec(`INSERT INTO gate_decisions (`+gateColumns[len("seq, "):]+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			d.ID, d.Workspace, d.KeyID, d.Case, d.PreconditionFn, d.ActionID, d.GateState, d.ReasonCode,
			d.R, d.C, d.O, d.Ro, d.Q, d.RepairAttempts, boolInt(d.VerifiableExt), d.HumanReadable, d.Notes,
			nullBytes(d.Evidence), fmtTime(d.At), d.PayloadSHA256)
		if err != nil {
			return err
		}
		if d.Seq, err = res.LastInsertId(); err != nil {
			return err
		}
		_, err = w.appendAudit(audit)
		return err
	})
	if err != nil {
		return ladder.GateDecisionRecord{}, fmt.Errorf("record gate decision: %w", err)
	}
	return d, nil
}

// GateHistory returns a workspace's gate decisions matching q, newest first.
func (s *Store) GateHistory(ctx context.Context, q ladder.GateHistoryQuery) ([]ladder.GateDecisionRecord, error) {
	limit := ladder.PageLimit(q.Limit)
	// Only the filters given are spelled out, so SQLite can answer from
	// the (workspace, …, seq) indexes instead of scanning.
	query := `SELECT ` + gateColumns + ` FROM gate_decisions WHERE workspace = ?`
	args := []any{q.Workspace}
	add := func(cond string, v any) {
		query += " AND " + cond
		args = append(args, v)
	}
	if q.Case != "" {
		add("case_id = ?", q.Case)
	}
	if q.PreconditionFn != "" {
		add("precondition_fn = ?", q.PreconditionFn)
	}
	if q.ActionID != "" {
		add("action_id = ?", q.ActionID)
	}
	if q.GateState != "" {
		add("gate_state = ?", q.GateState)
	}
	if !q.Since.IsZero() {
		add("at >= ?", fmtTime(q.Since))
	}
	if !q.Until.IsZero() {
		add("at < ?", fmtTime(q.Until))
	}
	if q.BeforeSeq > 0 {
		add("seq < ?", q.BeforeSeq)
	}
	query += " ORDER BY seq DESC LIMIT ?"
	args = append(args, limit)
	rows, err := s.readers.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("gate history: %w", s.mapErr(err))
	}
	out, err := collect(rows, scanGateDecision)
	if err != nil {
		return nil, fmt.Errorf("gate history: %w", s.mapErr(err))
	}
	return out, nil
}

func scanGateDecision(r scanner) (ladder.GateDecisionRecord, error) {
	var (
		d        ladder.GateDecisionRecord
		verif    int
		evidence []byte
		at       string
		err      error
	)
	if err := r.Scan(&d.Seq, &d.ID, &d.Workspace, &d.KeyID, &d.Case, &d.PreconditionFn, &d.ActionID, &d.GateState, &d.ReasonCode,
		&d.R, &d.C, &d.O, &d.Ro, &d.Q, &d.RepairAttempts, &verif, &d.HumanReadable, &d.Notes, &evidence, &at, &d.PayloadSHA256); err != nil {
		return ladder.GateDecisionRecord{}, err
	}
	d.VerifiableExt = verif != 0
	if len(evidence) > 0 {
		d.Evidence = evidence
	}
	if d.At, err = parseTime(at); err != nil {
		return ladder.GateDecisionRecord{}, err
	}
	return d, nil
}

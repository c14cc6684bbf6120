package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
)

// TestMigration0011Backfills opens a schema written before migration 0011:
// the migration fills queue and step from each record's data as
// AuditStepOf reads it, the append-only trigger is enabled again, and the
// chain still verifies.
func TestMigration0011Backfills(t *testing.T) {
	schema := newSchema(t)
	s := openTest(t, schema)
	at := time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)
	var entries []ladder.AuditEntry
	for _, data := range []any{
		map[string]any{"queue": "bills", "step": "post_tms"},
		map[string]any{"step": "read_bill"},
		map[string]any{"queue": 3, "step": []int{1}},
		nil,
		[]string{"bills", "post_tms"},
		map[string]any{"queue": "loads", "step": "post_tms", "item": "x"},
	} {
		e, err := ladder.NewAuditEntry("ws", "k1", ladder.AuditRoute, "s", at, data)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	recs, err := s.AppendAudit(context.Background(), entries...)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	conn := adminConn(t, schema)
	for _, stmt := range []string{
		`DROP INDEX audit_by_workspace_kind, audit_by_workspace_step`,
		`ALTER TABLE audit DROP COLUMN queue, DROP COLUMN step`,
		// Back to the schema before 0011: what later migrations made goes
		// too, since migrations apply above the newest one applied.
		`DROP TABLE deliveries, outbox`,
		`DROP TABLE tlog_head, tlog_hash, tlog_checkpoint, tlog_meta`,
		`ALTER TABLE audit DROP COLUMN ws_idx`, `DROP TABLE audit_ws_head`, `DROP SEQUENCE audit_seq_gen`,
		`CREATE TABLE audit_head (id boolean PRIMARY KEY DEFAULT true CHECK (id), seq bigint NOT NULL, hash text NOT NULL)`,
		`INSERT INTO audit_head (id, seq, hash) SELECT true, seq, hash FROM audit ORDER BY seq DESC LIMIT 1`,
		`CREATE INDEX audit_by_kind ON audit (kind, seq)`,
		`DELETE FROM schema_migrations WHERE version >= 11`,
	} {
		if _, err := conn.Exec(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}

	s = openTest(t, schema)
	for _, r := range recs {
		var queue, step string
		if err := conn.QueryRow(t.Context(), `SELECT queue, step FROM audit WHERE seq = $1`, r.Seq).Scan(&queue, &step); err != nil {
			t.Fatal(err)
		}
		wq, ws := ladder.AuditStepOf(r.Data)
		if queue != wq || step != ws {
			t.Errorf("record %d (%s): backfilled %q/%q, AuditStepOf says %q/%q", r.Seq, r.Data, queue, step, wq, ws)
		}
	}
	got, err := s.ListAudit(t.Context(), ladder.AuditQuery{Step: "post_tms"})
	if err != nil || len(got) != 2 || got[0].Seq != 1 || got[1].Seq != 6 {
		t.Errorf("step filter after the backfill: %v, %v", got, err)
	}
	if _, err := conn.Exec(t.Context(), `UPDATE audit SET actor = 'x' WHERE seq = 1`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Errorf("the append-only trigger is not back after the migration: %v", err)
	}
	if n, err := ladder.VerifyAudit(t.Context(), s); err != nil || n != 6 {
		t.Errorf("verify after the migration: %d, %v", n, err)
	}
	// Migration 0012 notes the records written before the logs, to be
	// verified before they become leaves.
	if m, err := s.TlogMeta(t.Context()); err != nil || m.LegacySeq != 6 || m.Adopted {
		t.Errorf("tlog meta after 0012 on 6 records: %+v, %v; want legacy_seq 6, not adopted", m, err)
	}
}

// TestReadOnly opens a schema read-only: reads work, nothing is migrated,
// and a write fails in the database as unavailable.
func TestReadOnly(t *testing.T) {
	schema := newSchema(t)
	w := openTest(t, schema)
	e, _ := ladder.NewAuditEntry("ws", "k1", ladder.AuditRoute, "s", time.Time{}, map[string]any{"step": "post_tms"})
	if _, err := w.AppendAudit(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(t.Context(), testDSN(t), Options{Schema: schema, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got, err := ro.ListAudit(t.Context(), ladder.AuditQuery{Step: "post_tms"}); err != nil || len(got) != 1 {
		t.Errorf("read-only list: %v, %v", got, err)
	}
	if _, err := ro.AppendAudit(t.Context(), e); !errors.Is(err, ladder.ErrUnavailable) {
		t.Errorf("append on a read-only store: %v, want ErrUnavailable", err)
	}
	if n, err := ladder.VerifyAudit(t.Context(), ro); err != nil || n != 1 {
		t.Errorf("read-only verify: %d, %v", n, err)
	}
}

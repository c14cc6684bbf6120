package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/ladderhq/ladder"
)

var _ ladder.EventStore = (*Store)(nil)

// insertEvent writes an event to the outbox in the write transaction of
// the change it reports (appendAudit calls it for an entry's Event).
func (w *wtx) insertEvent(e *ladder.Event) error {
	doc, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("event %s: %w", e.Type, err)
	}
	if _, err := w.exec(`INSERT INTO outbox (id, workspace, type, at, doc) VALUES (?, ?, ?, ?, ?)`,
		e.ID, e.Workspace, e.Type, fmtTime(e.At), doc); err != nil {
		return fmt.Errorf("insert event: %w", err)
	}
	return nil
}

// FanOut turns events not yet fanned out into deliveries.
func (s *Store) FanOut(ctx context.Context, limit int, targets func(ladder.Event) []string) (int, error) {
	// A read first: the dispatcher asks every second, and most times there
	// is nothing to take a write transaction for.
	var some bool
	if err := s.readers.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM outbox WHERE fanned = 0)`).Scan(&some); err != nil || !some {
		return 0, s.mapErr(err)
	}
	var n int
	err := s.write(ctx, func(w *wtx) error {
		n = 0
		rows, err := w.query(`SELECT seq, doc FROM outbox WHERE fanned = 0 ORDER BY seq LIMIT ?`, limit)
		if err != nil {
			return err
		}
		type found struct {
			seq int64
			ev  ladder.Event
		}
		all, err := collect(rows, func(r scanner) (found, error) {
			var (
				f   found
				doc []byte
			)
			if err := r.Scan(&f.seq, &doc); err != nil {
				return f, err
			}
			return f, json.Unmarshal(doc, &f.ev)
		})
		if err != nil {
			return err
		}
		now := fmtTime(s.now())
		for _, f := range all {
			for _, ep := range targets(f.ev) {
				if _, err := w.exec(`INSERT INTO deliveries (id, event_seq, event_id, event_type, workspace, endpoint, status, next_at, created_at)
					VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT (event_id, endpoint) DO NOTHING`,
					ladder.NewID("dlv"), f.seq, f.ev.ID, f.ev.Type, f.ev.Workspace, ep, now, now); err != nil {
					return err
				}
			}
			if _, err := w.exec(`UPDATE outbox SET fanned = 1 WHERE seq = ?`, f.seq); err != nil {
				return err
			}
		}
		n = len(all)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("fan out events: %w", err)
	}
	return n, nil
}

const deliveryCols = `d.seq, d.id, d.event_id, d.event_type, d.workspace, d.endpoint, d.status, d.attempts, d.next_at, d.last_error, d.last_status, d.created_at, d.delivered_at`

func scanDelivery(r scanner, withEvent bool) (ladder.Delivery, error) {
	var (
		d                  ladder.Delivery
		next, created      string
		lastErr, delivered sql.NullString
		lastStatus         sql.NullInt64
		doc                []byte
	)
	dest := []any{&d.Seq, &d.ID, &d.EventID, &d.EventType, &d.Workspace, &d.Endpoint, &d.Status, &d.Attempts, &next, &lastErr, &lastStatus, &created, &delivered}
	if withEvent {
		dest = append(dest, &doc)
	}
	if err := r.Scan(dest...); err != nil {
		return d, err
	}
	d.LastError, d.LastStatus = lastErr.String, int(lastStatus.Int64)
	var err error
	if d.NextAt, err = parseTime(next); err != nil {
		return d, err
	}
	if d.CreatedAt, err = parseTime(created); err != nil {
		return d, err
	}
	if d.DeliveredAt, err = parseTimePtr(delivered); err != nil {
		return d, err
	}
	if withEvent {
		d.Event = new(ladder.Event)
		if err := json.Unmarshal(doc, d.Event); err != nil {
			return d, fmt.Errorf("stored event: %w", err)
		}
	}
	return d, nil
}

// ClaimDeliveries leases due deliveries, at most slots[endpoint] of each
// endpoint.
func (s *Store) ClaimDeliveries(ctx context.Context, limit int, lease time.Duration, slots map[string]int) ([]ladder.Delivery, error) {
	var due bool
	if err := s.readers.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM deliveries WHERE status = 'pending' AND next_at <= ?)`, fmtTime(s.now())).Scan(&due); err != nil || !due {
		return nil, s.mapErr(err)
	}
	var out []ladder.Delivery
	err := s.write(ctx, func(w *wtx) error {
		out = nil
		now := normTime(s.now())
		for _, ep := range sortedEndpoints(slots) {
			n := min(slots[ep], limit-len(out))
			if n <= 0 {
				continue
			}
			rows, err := w.query(`SELECT `+deliveryCols+`, o.doc FROM deliveries d JOIN outbox o ON o.seq = d.event_seq
				WHERE d.endpoint = ? AND d.status = 'pending' AND d.next_at <= ? AND (d.lease_until IS NULL OR d.lease_until <= ?)
				ORDER BY d.next_at, d.seq LIMIT ?`, ep, fmtTime(now), fmtTime(now), n)
			if err != nil {
				return err
			}
			got, err := collect(rows, func(r scanner) (ladder.Delivery, error) { return scanDelivery(r, true) })
			if err != nil {
				return err
			}
			for _, d := range got {
				if _, err := w.exec(`UPDATE deliveries SET lease_until = ? WHERE seq = ?`, fmtTime(now.Add(lease)), d.Seq); err != nil {
					return err
				}
			}
			out = append(out, got...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	return out, nil
}

// sortedEndpoints returns the endpoints of slots in a fixed order.
func sortedEndpoints(slots map[string]int) []string {
	out := make([]string, 0, len(slots))
	for ep := range slots {
		out = append(out, ep)
	}
	sort.Strings(out)
	return out
}

// FinishDelivery records one try's outcome.
func (s *Store) FinishDelivery(ctx context.Context, r ladder.DeliveryResult) error {
	err := s.write(ctx, func(w *wtx) error {
		now := normTime(s.now())
		var err error
		switch {
		case r.Delivered:
			_, err = w.exec(`UPDATE deliveries SET status = 'delivered', attempts = attempts + 1, lease_until = NULL, last_error = NULL, last_status = ?, delivered_at = ? WHERE id = ?`,
				r.StatusCode, fmtTime(now), r.ID)
		case r.Dead:
			_, err = w.exec(`UPDATE deliveries SET status = 'dead', attempts = attempts + 1, lease_until = NULL, last_error = ?, last_status = ? WHERE id = ?`,
				r.Error, r.StatusCode, r.ID)
		default:
			_, err = w.exec(`UPDATE deliveries SET attempts = attempts + 1, lease_until = NULL, last_error = ?, last_status = ?, next_at = ? WHERE id = ?`,
				r.Error, r.StatusCode, fmtTime(now.Add(r.RetryIn)), r.ID)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("finish delivery: %w", err)
	}
	return nil
}

// ListDeliveries returns deliveries matching q, newest first.
func (s *Store) ListDeliveries(ctx context.Context, q ladder.DeliveryQuery) ([]ladder.Delivery, error) {
	where, args := `d.workspace = ?`, []any{q.Workspace}
	if q.Status != "" {
		where += ` AND d.status = ?`
		args = append(args, string(q.Status))
	}
	if q.Endpoint != "" {
		where += ` AND d.endpoint = ?`
		args = append(args, q.Endpoint)
	}
	if q.EventID != "" {
		where += ` AND d.event_id = ?`
		args = append(args, q.EventID)
	}
	if q.BeforeSeq > 0 {
		where += ` AND d.seq < ?`
		args = append(args, q.BeforeSeq)
	}
	rows, err := s.readers.QueryContext(ctx, `SELECT `+deliveryCols+` FROM deliveries d WHERE `+where+` ORDER BY d.seq DESC LIMIT ?`, append(args, ladder.PageLimit(q.Limit))...)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", s.mapErr(err))
	}
	out, err := collect(rows, func(r scanner) (ladder.Delivery, error) { return scanDelivery(r, false) })
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", s.mapErr(err))
	}
	return out, nil
}

// Redeliver makes a delivery pending and due now again.
func (s *Store) Redeliver(ctx context.Context, workspace, id string) (ladder.Delivery, error) {
	var d ladder.Delivery
	err := s.write(ctx, func(w *wtx) error {
		res, err := w.exec(`UPDATE deliveries SET status = 'pending', attempts = 0, next_at = ?, lease_until = NULL, delivered_at = NULL WHERE id = ? AND workspace = ?`,
			fmtTime(s.now()), id, workspace)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, ladder.ErrNotFound)
		}
		d, err = scanDelivery(w.queryRow(`SELECT `+deliveryCols+` FROM deliveries d WHERE d.id = ?`, id), false)
		return err
	})
	if err != nil {
		return ladder.Delivery{}, fmt.Errorf("redeliver: %w", err)
	}
	return d, nil
}

// DeliveryStats returns the figures of the delivery metrics, each count
// read from its status's partial index.
func (s *Store) DeliveryStats(ctx context.Context) (ladder.DeliveryStats, error) {
	var (
		st                                 ladder.DeliveryStats
		oldestD, oldestE                   sql.NullString
		pending, retrying, delivered, dead int64
	)
	err := s.readers.QueryRowContext(ctx, `SELECT
			(SELECT count(*) FROM deliveries WHERE status = 'pending'),
			(SELECT count(*) FROM deliveries WHERE status = 'pending' AND attempts > 0),
			(SELECT count(*) FROM deliveries WHERE status = 'delivered'),
			(SELECT count(*) FROM deliveries WHERE status = 'dead'),
			(SELECT min(o.at) FROM deliveries d JOIN outbox o ON o.seq = d.event_seq WHERE d.status = 'pending'),
			(SELECT min(at) FROM outbox WHERE fanned = 0)`).Scan(&pending, &retrying, &delivered, &dead, &oldestD, &oldestE)
	if err != nil {
		return st, fmt.Errorf("delivery stats: %w", s.mapErr(err))
	}
	st.Pending, st.Retrying, st.Delivered, st.Dead = int(pending), int(retrying), int(delivered), int(dead)
	now := s.now()
	for _, o := range []sql.NullString{oldestD, oldestE} {
		if !o.Valid {
			continue
		}
		t, err := parseTime(o.String)
		if err != nil {
			return st, err
		}
		st.OldestPending = max(st.OldestPending, now.Sub(t))
	}
	return st, nil
}

// RetireDeliveries makes the pending deliveries of unconfigured endpoints
// dead.
func (s *Store) RetireDeliveries(ctx context.Context, endpoints []string, reason string) (map[string]int, error) {
	known, err := json.Marshal(append([]string{}, endpoints...))
	if err != nil {
		return nil, err
	}
	const gone = `status = 'pending' AND endpoint NOT IN (SELECT value FROM json_each(?))`
	// A read first: nearly every start has nothing to retire.
	var some bool
	if err := s.readers.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM deliveries WHERE `+gone+`)`, string(known)).Scan(&some); err != nil || !some {
		return nil, s.mapErr(err)
	}
	out := map[string]int{}
	err = s.write(ctx, func(w *wtx) error {
		clear(out)
		rows, err := w.query(`SELECT endpoint, count(*) FROM deliveries WHERE `+gone+` GROUP BY endpoint`, string(known))
		if err != nil {
			return err
		}
		type count struct {
			ep string
			n  int
		}
		got, err := collect(rows, func(r scanner) (count, error) {
			var c count
			return c, r.Scan(&c.ep, &c.n)
		})
		if err != nil {
			return err
		}
		for _, c := range got {
			out[c.ep] = c.n
		}
		_, err = w.exec(`UPDATE deliveries SET status = 'dead', lease_until = NULL, last_error = ? WHERE `+gone, reason, string(known))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("retire deliveries: %w", err)
	}
	return out, nil
}

// PruneDeliveries deletes delivered deliveries, and events left with
// none, older than before.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int
	err := s.write(ctx, func(w *wtx) error {
		n = 0
		cut := fmtTime(before)
		res, err := w.exec(`DELETE FROM deliveries WHERE seq IN (SELECT seq FROM deliveries
			WHERE status = 'delivered' AND delivered_at < ? ORDER BY delivered_at LIMIT ?)`, cut, limit)
		if err != nil {
			return err
		}
		d, err := res.RowsAffected()
		if err != nil {
			return err
		}
		res, err = w.exec(`DELETE FROM outbox WHERE seq IN (SELECT o.seq FROM outbox o
			WHERE o.fanned = 1 AND o.at < ? AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = o.seq) ORDER BY o.at LIMIT ?)`, cut, limit)
		if err != nil {
			return err
		}
		e, err := res.RowsAffected()
		n = int(d + e)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune deliveries: %w", err)
	}
	return n, nil
}

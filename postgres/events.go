package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/ladderhq/ladder"
)

var _ ladder.EventStore = (*Store)(nil)

// flushEvents inserts the events of the batch's audit entries into the
// outbox, in the transaction that commits them (flush calls it), and
// queues one notification per event so waiters and dispatchers of every
// replica hear of it after the commit.
func (w *wtx) flushEvents() error {
	var ids, wss, types []string
	var ats []time.Time
	var docs [][]byte
	for _, p := range w.audit {
		for _, e := range p.entries {
			ev := e.Event
			if ev == nil {
				continue
			}
			doc, err := json.Marshal(ev)
			if err != nil {
				return fmt.Errorf("event %s: %w", ev.Type, err)
			}
			ids, wss, types, ats, docs = append(ids, ev.ID), append(wss, ev.Workspace), append(types, ev.Type), append(ats, ev.At), append(docs, doc)
			w.queueNotify(Event{Kind: EventOutbox, Workspace: ev.Workspace, EventType: ev.Type, ApprovalID: ev.Data.ApprovalID})
		}
	}
	if len(ids) == 0 {
		return nil
	}
	w.queueTail("insert events", `INSERT INTO outbox (id, workspace, type, at, doc)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::bytea[])`, ids, wss, types, ats, docs)
	return nil
}

// FanOut turns events not yet fanned out into deliveries; replicas skip
// each other's locked events.
func (s *Store) FanOut(ctx context.Context, limit int, targets func(ladder.Event) []string) (int, error) {
	// A read first: every replica asks every second, and most times there
	// is nothing to take a write transaction for.
	var some bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM outbox WHERE NOT fanned)`).Scan(&some); err != nil || !some {
		return 0, s.mapErr(err)
	}
	var n int
	err := s.write(ctx, func(w *wtx) error {
		n = 0
		rows, err := w.query(`SELECT seq, doc FROM outbox WHERE NOT fanned ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED`, limit)
		if err != nil {
			return err
		}
		type found struct {
			seq int64
			ev  ladder.Event
		}
		all, err := collect(rows, func(r pgx.Row) (found, error) {
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
		var (
			dids, eids, etypes, wss, eps []string
			eseqs, seqs                  []int64
		)
		for _, f := range all {
			seqs = append(seqs, f.seq)
			for _, ep := range targets(f.ev) {
				dids, eseqs, eids, etypes, wss, eps = append(dids, ladder.NewID("dlv")), append(eseqs, f.seq), append(eids, f.ev.ID), append(etypes, f.ev.Type), append(wss, f.ev.Workspace), append(eps, ep)
			}
		}
		if len(dids) > 0 {
			if _, err := w.exec(`INSERT INTO deliveries (id, event_seq, event_id, event_type, workspace, endpoint, status, next_at, created_at)
				SELECT d, s, e, t, ws, ep, 'pending', clock_timestamp(), clock_timestamp()
				FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[]) AS x(d, s, e, t, ws, ep)
				ON CONFLICT (event_id, endpoint) DO NOTHING`, dids, eseqs, eids, etypes, wss, eps); err != nil {
				return err
			}
		}
		if len(seqs) > 0 {
			if _, err := w.exec(`UPDATE outbox SET fanned = true WHERE seq = ANY($1)`, seqs); err != nil {
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

func scanDelivery(r pgx.Row, withEvent bool) (ladder.Delivery, error) {
	var (
		d          ladder.Delivery
		lastErr    *string
		lastStatus *int32
		doc        []byte
	)
	dest := []any{&d.Seq, &d.ID, &d.EventID, &d.EventType, &d.Workspace, &d.Endpoint, &d.Status, &d.Attempts, &d.NextAt, &lastErr, &lastStatus, &d.CreatedAt, &d.DeliveredAt}
	if withEvent {
		dest = append(dest, &doc)
	}
	if err := r.Scan(dest...); err != nil {
		return d, err
	}
	if lastErr != nil {
		d.LastError = *lastErr
	}
	if lastStatus != nil {
		d.LastStatus = int(*lastStatus)
	}
	d.NextAt, d.CreatedAt = normTime(d.NextAt), normTime(d.CreatedAt)
	if d.DeliveredAt != nil {
		t := normTime(*d.DeliveredAt)
		d.DeliveredAt = &t
	}
	if withEvent {
		d.Event = new(ladder.Event)
		if err := json.Unmarshal(doc, d.Event); err != nil {
			return d, fmt.Errorf("stored event: %w", err)
		}
	}
	return d, nil
}

// ClaimDeliveries leases due deliveries by the database's clock, at most
// slots[endpoint] of each endpoint; replicas skip each other's locked
// rows, so a delivery is claimed by one of them.
func (s *Store) ClaimDeliveries(ctx context.Context, limit int, lease time.Duration, slots map[string]int) ([]ladder.Delivery, error) {
	var out []ladder.Delivery
	eps := make([]string, 0, len(slots))
	for ep := range slots {
		eps = append(eps, ep)
	}
	sort.Strings(eps)
	var due bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM deliveries WHERE status = 'pending' AND next_at <= clock_timestamp())`).Scan(&due); err != nil || !due {
		return nil, s.mapErr(err)
	}
	err := s.write(ctx, func(w *wtx) error {
		out = nil
		for _, ep := range eps {
			n := min(slots[ep], limit-len(out))
			if n <= 0 {
				continue
			}
			rows, err := w.query(`UPDATE deliveries d SET lease_until = clock_timestamp() + $3 * interval '1 microsecond'
				FROM outbox o
				WHERE o.seq = d.event_seq AND d.seq IN (
					SELECT seq FROM deliveries
					WHERE endpoint = $1 AND status = 'pending' AND next_at <= clock_timestamp() AND (lease_until IS NULL OR lease_until <= clock_timestamp())
					ORDER BY next_at, seq LIMIT $2 FOR UPDATE SKIP LOCKED)
				RETURNING `+deliveryCols+`, o.doc`, ep, n, lease.Microseconds())
			if err != nil {
				return err
			}
			got, err := collect(rows, func(r pgx.Row) (ladder.Delivery, error) { return scanDelivery(r, true) })
			if err != nil {
				return err
			}
			sort.Slice(got, func(i, j int) bool { return got[i].Seq < got[j].Seq })
			out = append(out, got...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	return out, nil
}

// FinishDelivery records one try's outcome.
func (s *Store) FinishDelivery(ctx context.Context, r ladder.DeliveryResult) error {
	err := s.write(ctx, func(w *wtx) error {
		var err error
		switch {
		case r.Delivered:
			_, err = w.exec(`UPDATE deliveries SET status = 'delivered', attempts = attempts + 1, lease_until = NULL, last_error = NULL, last_status = $1, delivered_at = clock_timestamp() WHERE id = $2`,
				r.StatusCode, r.ID)
		case r.Dead:
			_, err = w.exec(`UPDATE deliveries SET status = 'dead', attempts = attempts + 1, lease_until = NULL, last_error = $1, last_status = $2 WHERE id = $3`,
				r.Error, r.StatusCode, r.ID)
		default:
			_, err = w.exec(`UPDATE deliveries SET attempts = attempts + 1, lease_until = NULL, last_error = $1, last_status = $2,
				next_at = clock_timestamp() + $3 * interval '1 microsecond' WHERE id = $4`,
				r.Error, r.StatusCode, r.RetryIn.Microseconds(), r.ID)
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
	where, args := `d.workspace = $1`, []any{q.Workspace}
	add := func(cond string, v any) {
		args = append(args, v)
		where += fmt.Sprintf(` AND `+cond, len(args))
	}
	if q.Status != "" {
		add(`d.status = $%d`, string(q.Status))
	}
	if q.Endpoint != "" {
		add(`d.endpoint = $%d`, q.Endpoint)
	}
	if q.EventID != "" {
		add(`d.event_id = $%d`, q.EventID)
	}
	if q.BeforeSeq > 0 {
		add(`d.seq < $%d`, q.BeforeSeq)
	}
	args = append(args, ladder.PageLimit(q.Limit))
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT `+deliveryCols+` FROM deliveries d WHERE `+where+` ORDER BY d.seq DESC LIMIT $%d`, len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", s.mapErr(err))
	}
	out, err := collect(rows, func(r pgx.Row) (ladder.Delivery, error) { return scanDelivery(r, false) })
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", s.mapErr(err))
	}
	return out, nil
}

// Redeliver makes a delivery pending and due now again.
func (s *Store) Redeliver(ctx context.Context, workspace, id string) (ladder.Delivery, error) {
	var d ladder.Delivery
	err := s.write(ctx, func(w *wtx) error {
		var err error
		d, err = scanDelivery(w.queryRow(`UPDATE deliveries d SET status = 'pending', attempts = 0, next_at = clock_timestamp(), lease_until = NULL, delivered_at = NULL
			WHERE id = $1 AND workspace = $2 RETURNING `+deliveryCols, id, workspace), false)
		if errors.Is(err, pgx.ErrNoRows) {
			return ladder.ErrNotFound
		}
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
		pending, retrying, delivered, dead int64
		oldest                             *float64
	)
	err := s.pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM deliveries WHERE status = 'pending'),
			(SELECT count(*) FROM deliveries WHERE status = 'pending' AND attempts > 0),
			(SELECT count(*) FROM deliveries WHERE status = 'delivered'),
			(SELECT count(*) FROM deliveries WHERE status = 'dead'),
			extract(epoch FROM clock_timestamp() - least(
				(SELECT min(o.at) FROM deliveries d JOIN outbox o ON o.seq = d.event_seq WHERE d.status = 'pending'),
				(SELECT min(at) FROM outbox WHERE NOT fanned)))::float8`).Scan(&pending, &retrying, &delivered, &dead, &oldest)
	if err != nil {
		return st, fmt.Errorf("delivery stats: %w", s.mapErr(err))
	}
	st.Pending, st.Retrying, st.Delivered, st.Dead = int(pending), int(retrying), int(delivered), int(dead)
	if oldest != nil {
		st.OldestPending = time.Duration(*oldest * float64(time.Second))
	}
	return st, nil
}

// RetireDeliveries makes the pending deliveries of unconfigured endpoints
// dead.
func (s *Store) RetireDeliveries(ctx context.Context, endpoints []string, reason string) (map[string]int, error) {
	known := append([]string{}, endpoints...)
	const gone = `status = 'pending' AND endpoint <> ALL($1::text[])`
	// A read first: nearly every start has nothing to retire.
	var some bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM deliveries WHERE `+gone+`)`, known).Scan(&some); err != nil || !some {
		return nil, s.mapErr(err)
	}
	out := map[string]int{}
	err := s.write(ctx, func(w *wtx) error {
		clear(out)
		rows, err := w.query(`UPDATE deliveries SET status = 'dead', lease_until = NULL, last_error = $2 WHERE `+gone+` RETURNING endpoint`, known, reason)
		if err != nil {
			return err
		}
		eps, err := collect(rows, func(r pgx.Row) (string, error) {
			var ep string
			return ep, r.Scan(&ep)
		})
		for _, ep := range eps {
			out[ep]++
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("retire deliveries: %w", err)
	}
	return out, nil
}

// PruneDeliveries deletes delivered deliveries, and events left with
// none, older than before. Replicas pruning at once skip each other's
// rows.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int
	err := s.write(ctx, func(w *wtx) error {
		n = 0
		// The outer status test is checked again on a row a redelivery
		// changed meanwhile: a delivery made pending again stays.
		// The batch is chosen once (a CTE), so a subquery run again by the
		// plan cannot pick more rows than limit.
		d, err := w.exec(`WITH doomed AS MATERIALIZED (SELECT seq FROM deliveries
				WHERE status = 'delivered' AND delivered_at < $1 ORDER BY delivered_at LIMIT $2 FOR UPDATE SKIP LOCKED)
			DELETE FROM deliveries x USING doomed WHERE x.seq = doomed.seq AND x.status = 'delivered'`, before, limit)
		if err != nil {
			return err
		}
		e, err := w.exec(`WITH doomed AS MATERIALIZED (SELECT o.seq FROM outbox o
				WHERE o.fanned AND o.at < $1 AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = o.seq) ORDER BY o.at LIMIT $2 FOR UPDATE SKIP LOCKED)
			DELETE FROM outbox x USING doomed WHERE x.seq = doomed.seq`, before, limit)
		if err != nil {
			return err
		}
		n = int(d.RowsAffected() + e.RowsAffected())
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune deliveries: %w", err)
	}
	return n, nil
}

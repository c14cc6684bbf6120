package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// batchTx is the transaction of one group-commit batch, on a connection of
// the pool. Its BEGIN travels in the round trip of its first statement and
// its COMMIT in the round trip of its last ones (the batch's audit, events
// and notifications: see commit), so a batch of routes makes four round
// trips where Pool.Begin and Tx.Commit would make six. On a machine whose
// cores are busy each round trip is two wake-ups, the database's backend
// and the writer, and the writer is the serial stage of every write.
//
// pgx.Tx cannot carry the COMMIT in a batch (its Rollback would then send
// a ROLLBACK of its own), so batchTx keeps the transaction itself: the
// connection's transaction status, which the server reports after every
// round trip, says whether BEGIN has run and whether there is anything to
// roll back.
type batchTx struct {
	conn *pgxpool.Conn
}

// beginBatch acquires the connection a batch runs on. Nothing is sent
// until the batch's first statement.
func (s *Store) beginBatch(ctx context.Context) (*batchTx, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &batchTx{conn: c}, nil
}

// inTx reports whether the connection is in a transaction: BEGIN has run
// (and, if the status is 'E', a statement after it failed). Every round
// trip is read to its end before the next is sent, so the status is the
// one the server reported after the last.
func (t *batchTx) inTx() bool {
	return t.conn.Conn().PgConn().TxStatus() != 'I'
}

// SendBatch sends b in one round trip, preceded by BEGIN when it is the
// transaction's first.
func (t *batchTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.inTx() {
		return t.conn.SendBatch(ctx, b)
	}
	withBegin := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, b.Len()+1)}
	withBegin.Queue("begin")
	withBegin.QueuedQueries = append(withBegin.QueuedQueries, b.QueuedQueries...)
	br := t.conn.SendBatch(ctx, withBegin)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return pgx.FailedBatchResults(b, fmt.Errorf("begin: %w", err))
	}
	return br
}

// Exec runs one statement.
func (t *batchTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.inTx() {
		return t.conn.Exec(ctx, sql, args...)
	}
	br := t.SendBatch(ctx, one(sql, args))
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// QueryRow runs one statement that returns at most one row.
func (t *batchTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.inTx() {
		return t.conn.QueryRow(ctx, sql, args...)
	}
	br := t.SendBatch(ctx, one(sql, args))
	return batchRow{row: br.QueryRow(), br: br}
}

// Query runs one statement that returns rows.
func (t *batchTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.inTx() {
		return t.conn.Query(ctx, sql, args...)
	}
	br := t.SendBatch(ctx, one(sql, args))
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// commit sends tail's statements and the COMMIT in one round trip. A
// statement's error is returned as it is, named as queueNamed named it;
// the server skips the rest of the round trip after it, the COMMIT too,
// so nothing is committed. A failure once the COMMIT's answer is being
// read is returned wrapped in errCommit: whether it happened is then
// unknown.
func (t *batchTx) commit(ctx context.Context, tail *pgx.Batch) error {
	reached := false
	tail.Queue("commit").Fn = func(br pgx.BatchResults) error {
		reached = true
		tag, err := br.Exec()
		if err == nil && tag.String() != "COMMIT" {
			err = pgx.ErrTxCommitRollback
		}
		return err
	}
	err := t.SendBatch(ctx, tail).Close()
	if err != nil && reached {
		return fmt.Errorf("%w: %w", errCommit, err)
	}
	return err
}

// queueNamed queues a statement in b whose error, should it fail, is
// named by name (what it stores) when the batch's results are closed.
func queueNamed(b *pgx.Batch, name, sql string, args ...any) {
	b.Queue(sql, args...).Fn = func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
}

// errCommit marks the failure of a batch's COMMIT itself.
var errCommit = fmt.Errorf("commit")

// release rolls back what the batch left uncommitted and returns the
// connection to the pool. A connection whose rollback fails is closed (the
// pool drops a connection that is not idle).
func (t *batchTx) release() {
	if pc := t.conn.Conn().PgConn(); !pc.IsClosed() && pc.TxStatus() != 'I' {
		ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
		if _, err := t.conn.Exec(ctx, "rollback"); err != nil {
			pc.Close(ctx)
		}
		cancel()
	}
	t.conn.Release()
}

// rollbackTimeout bounds the rollback of a failed batch.
const rollbackTimeout = 5 * time.Second

// one is a batch of one statement.
func one(sql string, args []any) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return b
}

// batchRow is the row of a batch's one statement: Scan reads it, then
// closes the batch so the connection can run the next statement.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// batchRows are the rows of a batch's one statement; the batch is closed
// with them, or when Next finds no more.
type batchRows struct {
	pgx.Rows
	br   pgx.BatchResults
	cerr error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	r.cerr = r.br.Close()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.cerr
}

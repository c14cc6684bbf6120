// Package postgres is ladder's store for several replicas: a ladder.Store
// on one PostgreSQL database, through github.com/jackc/pgx/v5, that any
// number of `ladder serve` processes share.
//
// Its semantics are the sqlite package's, method for method (the storetest
// conformance suite runs against both); what differs is where writes are
// serialized. Inside one process, every write goes through a group-commit
// goroutine (internal/groupcommit) that runs the writes of concurrent
// callers in one transaction and answers them after the one commit (the
// writes run without savepoints first; if one fails, the batch runs again
// with a savepoint per write, so the failing write is undone alone). The
// audit entries of a batch are appended after its last write, just before
// the commit. Between processes, the database serializes:
//
//   - each workspace's audit chain has its head, one row of audit_ws_head,
//     locked with SELECT ... FOR UPDATE by every transaction that appends
//     to that workspace, just before its records are inserted and until it
//     commits, so appends to one workspace from every replica form one
//     chain and one log, and appends to different workspaces do not wait
//     on each other (seqs come from a sequence, which locks no row);
//   - RecordReview locks the step's state row before it runs the decider,
//     so two replicas never make the same lane change twice;
//   - RecordRoute inserts with ON CONFLICT DO NOTHING and reads back, so
//     one item at one step has one route whichever replica routed it.
//
// A transaction chosen as a deadlock victim (replicas whose batches lock
// the same rows in another order) is rolled back and its whole batch run
// again; nothing was acknowledged, so nothing is lost or doubled.
//
// Other replicas learn of lane and key changes through LISTEN/NOTIFY (see
// Store.Subscribe).
//
// The schema is embedded SQL under migrations/, applied at Open in one
// transaction under a PostgreSQL advisory lock (replicas starting together
// apply each migration once) and recorded in schema_migrations.
package postgres

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/groupcommit"
	"github.com/ladderhq/ladder/internal/leaffeed"
	mig "github.com/ladderhq/ladder/internal/migrate"
)

var _ ladder.Store = (*Store)(nil)

// Options configure a Store. The zero value is usable.
type Options struct {
	// Logger receives migrations applied, retried and failed batches, and
	// the listener's reconnects. Nil discards.
	Logger *slog.Logger
	// Now is the clock used for times a caller left zero (an audit entry's
	// or a route's time). Nil means time.Now.
	Now func() time.Time
	// MaxConns caps the connections of the pool (reads, and the one write
	// transaction in flight). Zero keeps pgx's default, max(4, NumCPU), or
	// the DSN's pool_max_conns.
	MaxConns int
	// Schema, when set, is the schema ladder's tables live in: it is
	// created if missing and made the search_path of every connection.
	// Empty uses the DSN's search_path (usually "public").
	Schema string
	// MaxBatch caps how many writes share one transaction. Zero means 256.
	MaxBatch int
	// ReadOnly makes every transaction of every connection read-only
	// (default_transaction_read_only) and leaves the schema as it is (no
	// migration), so a write fails in the database with an error wrapping
	// ladder.ErrUnavailable. For commands that only read (ladder audit
	// list|verify|export --db).
	ReadOnly bool
}

// Store is a ladder.Store on a PostgreSQL database. Its methods are safe for
// concurrent use, and several processes may open the same database.
type Store struct {
	log    *slog.Logger
	now    func() time.Time
	pool   *pgxpool.Pool
	schema string // the schema the tables are in, for NOTIFY payloads
	origin string // this Store's id in NOTIFY payloads
	batch  *groupcommit.Batcher[*wtx]
	lis    *listener
	closed atomic.Bool
	// probeSwept is set once Ping has deleted other stores' stale probe rows.
	probeSwept atomic.Bool
	// feed holds the leaves this store's committed batches appended, for
	// its integrator (TlogFed); another replica's are read back.
	feed leaffeed.Feed
}

//go:embed migrations/*.sql
var migrations embed.FS

const (
	// batchTimeout bounds one write transaction, so a database that stops
	// answering fails the batch (ErrUnavailable) instead of hanging it.
	batchTimeout = 30 * time.Second
	// batchAttempts is how often a batch is run when PostgreSQL aborts it
	// as a deadlock victim or for a serialization failure. Five, run back
	// to back, were too few on a loaded machine: with two replicas'
	// reviews and proposals of one step racing, fourteen proposals, a
	// batch's worth, were answered 503 at once
	// (TestShadowCapReplicasPostgres under `go test -race ./...`).
	batchAttempts = 10
	// retryPause bounds the random pause before a batch's next attempt,
	// times the attempts so far: the deadlock's winner commits meanwhile,
	// and the two replicas' next batches do not meet again in step.
	retryPause = 10 * time.Millisecond
	// lockNamespace is the first key of ladder's advisory locks ("ladd").
	lockNamespace = 0x6c616464
)

// Open connects to the database at dsn (a postgres:// URL or key=value
// string, as pgx reads it) and brings its schema up to date. A database
// that cannot be reached is an error wrapping ladder.ErrUnavailable.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err) // pgx redacts the password
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = int32(min(opts.MaxConns, 1<<20))
	}
	if opts.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	}
	if opts.ReadOnly {
		cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	} else {
		// A connection opened while the database took no writes (a standby
		// before its promotion, default_transaction_read_only set for the
		// database or the role) keeps that for its life, and every write
		// put on it after the database takes writes again would fail: the
		// pool closes such a connection when it is released instead of
		// keeping it (TestWritesResumeAfterReadOnly). pgxpool runs the
		// hook, and returns the connection, in a goroutine of its own.
		cfg.AfterRelease = func(c *pgx.Conn) bool { return !readOnlySession(c.PgConn()) }
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	s := &Store{log: opts.Logger, now: opts.Now, pool: pool, origin: newOrigin()}
	if opts.ReadOnly {
		// Connect now, so an unreachable database fails the open as it
		// does when migrating.
		if err := pool.Ping(ctx); err != nil {
			pool.Close()
			return nil, fmt.Errorf("open postgres: %w", s.mapErr(err))
		}
		s.schema = opts.Schema
	} else if s.schema, err = migrate(ctx, pool, opts.Schema, opts.Logger); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: migrate: %w", s.mapErr(err))
	}
	s.lis = newListener(s, cfg.ConnConfig)
	s.batch = groupcommit.New(s.runBatch, groupcommit.Options{MaxBatch: opts.MaxBatch})
	return s, nil
}

// readOnlySession reports whether the server said, when c connected,
// that c's transactions are read-only by default or that it is a hot
// standby. PostgreSQL reports both settings from version 14; an older
// server reports neither, and its connections are kept as before.
func readOnlySession(c *pgconn.PgConn) bool {
	return c.ParameterStatus("default_transaction_read_only") == "on" || c.ParameterStatus("in_hot_standby") == "on"
}

func newOrigin() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// loadMigrations returns the embedded migrations, oldest first.
func loadMigrations() ([]mig.Migration, error) { return mig.Load(migrations, "migrations") }

// migrate creates the schema if one is configured and applies every
// embedded migration the database lacks, all under a session advisory lock
// keyed by the schema, so replicas starting together apply each migration
// once. It returns the schema the tables are in.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, log *slog.Logger) (string, error) {
	ms, err := loadMigrations()
	if err != nil {
		return "", err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Release()
	if schema == "" {
		var cur *string
		if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&cur); err != nil {
			return "", err
		}
		if cur == nil {
			return "", errors.New("no schema in the search_path exists; set Options.Schema")
		}
		schema = *cur
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1, hashtext($2))", lockNamespace, schema); err != nil {
		return "", fmt.Errorf("advisory lock: %w", err)
	}
	defer func() {
		// A fresh context: the lock must go even when ctx has ended. If
		// the unlock fails the connection is broken, and the lock went
		// with its session.
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, "SELECT pg_advisory_unlock($1, hashtext($2))", lockNamespace, schema); err != nil {
			conn.Conn().Close(uctx)
		}
	}()
	applied, err := applyMigrations(ctx, conn.Conn(), schema, ms)
	if err != nil {
		return "", err
	}
	for _, m := range applied {
		log.Info("applied migration", "migration", m.Name, "schema", schema)
	}
	return schema, nil
}

// applyMigrations applies the migrations of ms (oldest first) newer than
// the newest schema_migrations lists, and returns them. It looks before it
// creates: a replica whose role may not create (or whose transactions are
// read-only) opens a database that is up to date. What it creates — the
// schema, schema_migrations, each migration — goes in one transaction, so
// an upgrade that fails part-way leaves the database at the version it
// had, which the binary before still opens, and the first start on a new
// schema commits once, not once a migration. The error names the
// migration that failed.
func applyMigrations(ctx context.Context, conn *pgx.Conn, schema string, ms []mig.Migration) ([]mig.Migration, error) {
	var hasSchema, hasTable bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1), to_regclass('schema_migrations') IS NOT NULL`, schema).Scan(&hasSchema, &hasTable); err != nil {
		return nil, err
	}
	var newest int
	if hasTable {
		if err := conn.QueryRow(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&newest); err != nil {
			return nil, fmt.Errorf("schema_migrations: %w", err)
		}
	}
	if err := mig.CheckNewest(ms, newest); err != nil {
		return nil, err
	}
	var pending []mig.Migration
	for _, m := range ms {
		if m.Version > newest {
			pending = append(pending, m)
		}
	}
	if len(pending) == 0 {
		return nil, nil // up to date: nothing to create (the table implies the schema)
	}
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if !hasSchema {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
				return fmt.Errorf("create schema %s: %w", schema, err)
			}
		}
		if !hasTable {
			if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
				version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)`); err != nil {
				return fmt.Errorf("schema_migrations: %w", err)
			}
		}
		for _, m := range pending {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, now())", m.Version, m.Name); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return pending, nil
}

// Ping reports whether the store can be read and durably written: a round
// trip on the pool, then an upsert of this Store's write_probe row
// committed through the group-commit writer. A standby, a read-only
// database, a full disk or a role that lost its write privileges fails it
// with ErrUnavailable, as they fail every other write.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("ping: %w", errClosed)
	}
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping: %w", s.mapErr(err))
	}
	sweep := !s.probeSwept.Load()
	if err := s.write(ctx, func(w *wtx) error {
		if _, err := w.exec(`INSERT INTO write_probe (origin, at) VALUES ($1, now())
			ON CONFLICT (origin) DO UPDATE SET at = excluded.at`, s.origin); err != nil {
			return err
		}
		if sweep {
			// Each process start adds a row; drop those of stores gone a day.
			_, err := w.exec(`DELETE FROM write_probe WHERE origin <> $1 AND at < now() - interval '1 day'`, s.origin)
			return err
		}
		return nil
	}); err != nil {
		return fmt.Errorf("ping: write probe: %w", err)
	}
	if sweep {
		s.probeSwept.Store(true)
	}
	return nil
}

// WriteStats reports what the store's group commit has done: commits,
// the writes in them, and its waits for more writes (metrics.StoreWrites).
func (s *Store) WriteStats() groupcommit.Stats {
	return s.batch.Stats()
}

// Close runs every write already queued, stops the listener (closing every
// Subscribe channel) and closes the pool. Later calls fail with an error
// wrapping ladder.ErrUnavailable. Close is safe to call more than once.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.batch.Close()
	s.lis.close()
	s.pool.Close()
	return nil
}

// wtx is the transaction of one batch, as the ops of the batch see it. Ops
// queue their audit entries and notifications; the batch appends and sends
// them after the last op, just before the commit (see flush).
type wtx struct {
	ctx    context.Context
	tx     *batchTx
	s      *Store
	audit  []pendingAudit
	notify []string
	// deferRoutes lets RecordRoute queue its insert in routes instead of
	// running it (see flushRoutes); set for an optimistic run of a batch
	// of several ops.
	deferRoutes bool
	routes      []pendingRoute
	// routesErr is flushRoutes' failure, kept so that the batch fails
	// even if the op whose statement flushed the routes ignored it.
	routesErr error
	// keys are the answers of activeKey in this transaction.
	keys ladder.KeyMemo
	// checks are the keys the batch's ops check (checkedKeys).
	checks []string
	// tail holds the batch's last statements, each named for its error
	// (queueTail), sent with its COMMIT (see flush).
	tail pgx.Batch
	// fed are the leaves flush's appends made, published to the store's
	// feed once the batch commits.
	fed []leaffeed.Leaf
}

// activeKey is a ladder.KeyCheck inside the write's transaction: the key
// as stored now must be active at the store's clock (ladder.Key.Active),
// else ErrKeyInactive. FOR SHARE makes a revocation committing on another
// replica wait for this transaction, or this read wait for it: either the
// write commits before the revocation or it sees it. Each key is read once
// per transaction, and the first read also reads the other keys the
// batch's ops check (wtx.checks), so a batch of many agents' writes reads
// their keys in one round trip, not one each; a key the read did not find
// is read again by its own check. No op writes a key and then routes in
// the same batch, so the read need not wait for the queued routes
// (flushRoutes).
func (w *wtx) activeKey(id string) error {
	now := w.s.now()
	return w.keys.Check(id, now, func(id string) (ladder.Key, bool, error) {
		ids := []string{id}
		for _, other := range w.checks {
			if _, known := w.keys[other]; !known && other != id {
				ids = append(ids, other)
			}
		}
		rows, err := w.tx.Query(w.ctx, `SELECT `+keyColumns+` FROM keys WHERE id = ANY($1) FOR SHARE`, ids)
		if err != nil {
			return ladder.Key{}, false, err
		}
		keys, err := collect(rows, scanKey)
		if err != nil {
			return ladder.Key{}, false, err
		}
		var (
			asked ladder.Key
			found bool
		)
		for _, k := range keys {
			if k.ID == id {
				asked, found = k, true
				continue
			}
			_ = w.keys.Learn(k.ID, k, true, now)
		}
		return asked, found, nil
	})
}

// checkedKeys returns the keys that the ops of the batch run under ctx
// check at commit (ladder.RequireActiveKey), each once.
func checkedKeys(ctx context.Context) []string {
	var ids []string
	for _, c := range groupcommit.OpContexts(ctx) {
		if kc := ladder.ActiveKeyCheck(c); kc != nil {
			ids = append(ids, kc.KeyID())
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// pendingAudit is one op's request to append entries; out, when set,
// receives the sealed records once the batch has appended them.
type pendingAudit struct {
	entries []readyEntry
	out     *[]ladder.AuditRecord
}

// readyEntry is an audit entry with its data canonical and the queue and
// step that data names (ladder.AuditStepOf), which the row keeps beside it.
type readyEntry struct {
	ladder.AuditEntry
	queue, step string
}

// exec, queryRow and query run a statement of an op in the batch's
// transaction, after the routes queued before it (flushRoutes), so every
// op sees the database as if the ops before it had run in full.
func (w *wtx) exec(query string, args ...any) (pgconn.CommandTag, error) {
	if err := w.flushRoutes(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return w.tx.Exec(w.ctx, query, args...)
}

func (w *wtx) queryRow(query string, args ...any) pgx.Row {
	if err := w.flushRoutes(); err != nil {
		return errRow{err}
	}
	return w.tx.QueryRow(w.ctx, query, args...)
}

func (w *wtx) query(query string, args ...any) (pgx.Rows, error) {
	if err := w.flushRoutes(); err != nil {
		return nil, err
	}
	return w.tx.Query(w.ctx, query, args...)
}

// errRow is a row whose Scan fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// runBatch is the group-commit run function: one transaction, the ops one
// after another, the batch's audit appended last, one COMMIT.
//
// The ops first run optimistically, without savepoints, which saves two
// round trips per op: nearly every op succeeds. When one fails, the
// transaction is rolled back and the batch runs again with each op in its
// own savepoint, so the failing op is undone alone (ops are closures that
// set, never accumulate, their results, so running one again is safe). A
// batch that PostgreSQL aborts as a deadlock victim is rolled back and run
// again too.
func (s *Store) runBatch(ctx context.Context, ops []groupcommit.Op[*wtx]) []error {
	return s.runChecking(ctx, ops, checkedKeys(ctx))
}

// runChecking is runBatch for ops that check the keys checks at commit.
func (s *Store) runChecking(ctx context.Context, ops []groupcommit.Op[*wtx], checks []string) []error {
	ctx, cancel := context.WithTimeout(ctx, batchTimeout)
	defer cancel()
	// A lone op needs no savepoint: if it fails, the transaction rolls back.
	safe := false
	for attempt := 1; ; {
		errs, err, retry := s.tryBatch(ctx, ops, checks, safe)
		switch {
		case err == nil:
			return errs
		case errors.Is(err, errOpFailed):
			safe = true
			continue
		case retry && attempt < batchAttempts:
			s.log.Warn("write batch aborted; running it again", "ops", len(ops), "attempt", attempt, "err", err)
			pause := time.NewTimer(mrand.N(time.Duration(attempt) * retryPause))
			select {
			case <-pause.C:
			case <-ctx.Done():
				pause.Stop()
				return groupcommit.Fail(len(ops), s.mapErr(fmt.Errorf("%w (before attempt %d: %w)", err, attempt+1, ctx.Err())))
			}
			attempt++
			continue
		}
		s.log.Error("write batch failed", "ops", len(ops), "err", err)
		return groupcommit.Fail(len(ops), s.mapErr(err))
	}
}

// errOpFailed ends an optimistic run of a batch in which an op failed.
var errOpFailed = errors.New("an op of the batch failed")

// tryBatch runs the batch once, with a savepoint per op when safe. A
// non-nil err fails the run (nothing committed); retry says whether running
// it again may succeed.
func (s *Store) tryBatch(ctx context.Context, ops []groupcommit.Op[*wtx], checks []string, safe bool) (errs []error, err error, retry bool) {
	tx, err := s.beginBatch(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err), false
	}
	defer tx.release() // after the commit, only the connection's release
	w := &wtx{ctx: ctx, tx: tx, s: s, checks: checks, deferRoutes: !safe && len(ops) > 1}
	errs = make([]error, len(ops))
	for i, op := range ops {
		if safe {
			opErr, fatal := w.savepoint(op)
			if fatal != nil {
				return nil, fatal, retryable(fatal)
			}
			errs[i] = opErr
			continue
		}
		err := op(w)
		if err == nil {
			err = w.routesErr
		}
		if err != nil {
			switch {
			case errors.Is(err, errOpFailed):
				return nil, errOpFailed, false
			case retryable(err):
				return nil, err, true
			case len(ops) == 1:
				errs[0] = err
				return errs, nil, false // rolled back by the deferred release
			}
			return nil, errOpFailed, false
		}
	}
	if err := w.flushRoutes(); err != nil {
		if errors.Is(err, errOpFailed) {
			return nil, errOpFailed, false
		}
		return nil, err, retryable(err)
	}
	if err := w.flush(); err != nil {
		return nil, err, retryable(err)
	}
	if err := tx.commit(ctx, &w.tail); err != nil {
		// A commit whose answer was lost may have happened: not retried.
		// A statement sent with it that PostgreSQL refused as a deadlock
		// victim stopped the round trip before the COMMIT, so nothing
		// committed and the batch may run again.
		return nil, err, !errors.Is(err, errCommit) && retryable(err)
	}
	s.feed.Publish(w.fed)
	return errs, nil, false
}

// savepoint runs op in a savepoint, rolling back what it did (and the audit
// and notifications it queued) when it fails. A deadlock or serialization
// failure is returned as fatal: the locks the batch's earlier ops hold are
// part of the cycle, so only running the whole batch again breaks it.
func (w *wtx) savepoint(op groupcommit.Op[*wtx]) (opErr, fatal error) {
	if _, err := w.exec("SAVEPOINT gc_op"); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	na, nn := len(w.audit), len(w.notify)
	if err := op(w); err != nil {
		if retryable(err) {
			return nil, err
		}
		w.audit, w.notify = w.audit[:na], w.notify[:nn]
		if _, rerr := w.exec("ROLLBACK TO SAVEPOINT gc_op"); rerr != nil {
			return nil, fmt.Errorf("%w (rollback to savepoint: %w)", err, rerr)
		}
		// The rollback also gave up the key locks (FOR SHARE) taken since
		// the savepoint, so a revocation may commit before this batch
		// does: the keys are read, and locked, again by the next op that
		// checks one.
		w.keys = nil
		opErr = err
	}
	if _, err := w.exec("RELEASE SAVEPOINT gc_op"); err != nil {
		return nil, fmt.Errorf("release savepoint: %w", err)
	}
	return opErr, nil
}

// retryable reports whether PostgreSQL aborted the work for a reason that
// running it again can cure.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// write runs op in a group-commit batch and returns once it is durable.
func (s *Store) write(ctx context.Context, op func(w *wtx) error) error {
	if s.closed.Load() {
		return errClosed
	}
	op, done := ladder.KeyCheckedOp(ctx, op, (*wtx).activeKey)
	err := s.batch.Do(ctx, op)
	done(err)
	return s.mapErr(err)
}

// errClosed is the error of a call on a closed store.
var errClosed = fmt.Errorf("%w: store closed", ladder.ErrUnavailable)

// mapErr turns driver errors into the store's sentinel errors: an
// integrity constraint is ErrConflict (as SQLite's SQLITE_CONSTRAINT is);
// anything that means the database cannot durably write now (no
// connection, a read-only transaction or standby, disk full, a revoked
// privilege, shutting down, a closed store) is ErrUnavailable. The
// driver's error stays wrapped for the log.
func (s *Store) mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ladder.ErrNotFound), errors.Is(err, ladder.ErrConflict), errors.Is(err, ladder.ErrUnavailable):
		return err
	case errors.Is(err, groupcommit.ErrClosed):
		return fmt.Errorf("%w: %w", ladder.ErrUnavailable, err)
	}
	// A connection the server refused is the store being unavailable,
	// whatever the refusal's code (a database closed to connections is
	// 55000, a role that may not log in 28000): checked before the codes,
	// since the ConnectError wraps the server's PgError.
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return fmt.Errorf("%w: %w", ladder.ErrUnavailable, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		class := pe.Code[:min(2, len(pe.Code))]
		switch {
		case class == "23": // integrity constraint violation
			return fmt.Errorf("%w: %w", ladder.ErrConflict, err)
		case class == "08", // connection exception
			class == "53",      // insufficient resources (disk full, out of memory, too many connections)
			class == "58",      // system error (I/O)
			class == "57",      // operator intervention: shutdown, cannot connect now, statement cancelled
			class == "40",      // deadlock or serialization failure that survived the retries
			pe.Code == "25006", // read_only_sql_transaction (a standby, or default_transaction_read_only)
			pe.Code == "42501", // insufficient_privilege: ladder's role may no longer write its tables
			pe.Code == "55P03": // lock_not_available
			return fmt.Errorf("%w: %w", ladder.ErrUnavailable, err)
		}
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) || pgconn.Timeout(err) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		s.closed.Load() {
		return fmt.Errorf("%w: %w", ladder.ErrUnavailable, err)
	}
	return err
}

// readErr maps a read's error; pgx.ErrNoRows becomes ErrNotFound.
func (s *Store) readErr(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ladder.ErrNotFound
	}
	return s.mapErr(err)
}

// reading fails fast on a closed store, so reads after Close get the same
// ErrUnavailable as writes.
func (s *Store) reading() error {
	if s.closed.Load() {
		return errClosed
	}
	return nil
}

// normTime is the time as the store keeps it: UTC, microseconds.
func normTime(t time.Time) time.Time { return ladder.NormTime(t) }

// nullTime stores a zero time as NULL, so it reads back zero.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return normTime(t)
}

// nullTimePtr stores a nil time as NULL; a set time, even zero, reads back
// set, as in the sqlite store.
func nullTimePtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return normTime(*t)
}

// fromNull reads a nullable timestamptz scanned into a *time.Time.
func fromNull(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

func fromNullPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// nullBytes stores an empty JSON value as NULL so it reads back as nil.
func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

// collect scans every row with scan and closes rows.
func collect[T any](rows pgx.Rows, scan func(pgx.Row) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

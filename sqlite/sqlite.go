// Package sqlite is ladder's embedded store: a ladder.Store on one SQLite
// file, through modernc.org/sqlite (pure Go, so ladder builds with
// CGO_ENABLED=0).
//
// The database runs in WAL mode with synchronous=FULL: a write is on disk
// when the method that made it returns. Reads use a small pool of read-only
// connections; every write goes through one writer connection owned by a
// group-commit goroutine (internal/groupcommit), which runs the writes of
// concurrent callers in one BEGIN IMMEDIATE transaction (each in its own
// savepoint only when one of them fails, see runBatch), and answers them
// after the one commit. Audit entries are appended in the transaction of
// the write they describe, after reading the chain's last hash from the
// table itself, so a second process (the CLI) appending to the same file
// keeps the chain whole.
//
// The writer connection opens the file through a thin VFS over SQLite's
// own (walvfs.go) that hands a commit's WAL frames to the kernel in one
// write before the commit's fsync, where SQLite alone makes two a page.
//
// The schema is embedded SQL under migrations/, applied at Open in one
// transaction and recorded in schema_migrations.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/groupcommit"
	"github.com/ladderhq/ladder/internal/leaffeed"
	mig "github.com/ladderhq/ladder/internal/migrate"
	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var _ ladder.Store = (*Store)(nil)

// Options configure a Store. The zero value is usable.
type Options struct {
	// Logger receives migrations applied and failed batches. Nil discards.
	Logger *slog.Logger
	// Now is the clock used for times a caller left zero (an audit entry's
	// or a route's time). Nil means time.Now.
	Now func() time.Time
	// Readers caps the read-only connections. Zero means max(4, GOMAXPROCS).
	Readers int
	// MaxBatch caps how many writes share one transaction. Zero means 256.
	MaxBatch int
	// Linger is how long the writer may wait for more writes before it
	// commits a small batch while other writers are in flight
	// (groupcommit.Options.Linger, with LingerBatch 16). Zero means
	// DefaultLinger; negative never lingers.
	Linger time.Duration
	// ReadOnly opens an existing database for reading only (SQLite's
	// mode=ro): a missing file is an error naming it and is never
	// created, the schema is not migrated, and every write fails with an
	// error wrapping ladder.ErrUnavailable. For commands that only read
	// (ladder audit list|verify|export --db).
	ReadOnly bool
	// expectLinger replaces ExpectLinger when set: a test makes the calls'
	// wait long enough to see which writes wait it.
	expectLinger time.Duration
}

// DefaultLinger is Options.Linger's default. Every SQLite commit writes
// each page it dirtied to the WAL and syncs it; a load of proxied calls
// (each waits on its upstream between its two writes) commits a few writes
// at a time; a wait of up to 300 µs lets ~1.7 times as many share one
// commit, for 43% fewer syncs and 25% fewer WAL pages a call
// (BENCHMARKS.md, issue 22 session 5).
const DefaultLinger = 300 * time.Microsecond

// ExpectLinger is how long the writer may wait for more writes while 16
// or more calls are running in this process (groupcommit.Options.Expect
// and ExpectLinger): their results come as their upstreams answer, a few
// hundred microseconds apart under load, so a longer wait gathers more of
// them into one commit. Measured with 64 clients of proxied calls: 1 ms
// made 7–9 writes a commit against 5, for about a tenth less of ladder's
// CPU a call (BENCHMARKS.md, issue 22, session 33); 2 ms, waiting for as
// many writes as calls run, 12–14, for a tenth less again (session 34);
// 4 ms, 17–21, for a tenth less again on a machine where the commit was
// an eighth of ladder's CPU, most of it the kernel's sync and WAL write
// (session 40); 7 ms, 26–31, for 7% less again, and 10 ms no less than
// 7 (session 41). Only a batch of calls' writes waits this long (see
// writeCall): any other write in it, a route beside the calls, cuts the
// wait to Options.Linger, so the calls' wait is not the routes' (with
// every write waiting, 7 ms had cost a route beside them 4 ms; session 40).
const ExpectLinger = 7 * time.Millisecond

// Store is a ladder.Store on one SQLite database file. Its methods are safe
// for concurrent use, and several processes may open the same file.
type Store struct {
	path    string
	log     *slog.Logger
	now     func() time.Time
	readers *sql.DB
	writer  *sql.DB
	batch   *groupcommit.Batcher[*wtx]
	closed  atomic.Bool
	stmts   stmtCache
	// wstmts are the write statements prepared on the writer's one
	// connection, kept across transactions (see wtx.prepare). Only the
	// group-commit goroutine uses it, and Close once that has stopped.
	wstmts map[string]*sql.Stmt
	// ckpt is the connection that checkpoints the WAL in the background,
	// so no commit waits for a checkpoint (see checkpointLoop).
	ckpt     *sql.DB
	stopCkpt chan struct{}
	ckptDone chan struct{}
	// running counts the calls this process began and has not yet
	// stored an outcome for: each will write again when its upstream
	// answers, which the group commit's linger waits for (Options.Expect
	// of package groupcommit). A call begun before a restart and settled
	// after it is not counted, so the count never goes below zero.
	running atomic.Int64
	// feed holds the leaves committed batches appended, for the
	// integrator (TlogFed).
	feed leaffeed.Feed
	// readOnly is set by Options.ReadOnly: there is no writer, batcher or
	// checkpointer, only readers.
	readOnly bool
	// noAuditStep is set on a read-only open of a database that predates
	// migration 0011, which it cannot apply: the audit step filter needs
	// its columns.
	noAuditStep bool
	// globalChain is set on a read-only open of a database that predates
	// per-workspace chains (migration 0014): all its records form one
	// chain.
	globalChain bool
}

// checkpointEvery is how often the background checkpointer copies the WAL
// into the database file when there were writes.
const checkpointEvery = 250 * time.Millisecond

//go:embed migrations/*.sql
var migrations embed.FS

// busyTimeoutMS is how long a connection waits for a lock another process
// (the CLI, a backup) holds before failing with SQLITE_BUSY.
const busyTimeoutMS = 10000

// Open opens (creating if needed) the database at path and brings its
// schema up to date. The error of a database that cannot be opened or
// migrated names the path and what went wrong.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Readers <= 0 {
		opts.Readers = max(4, runtime.GOMAXPROCS(0))
	}
	if path == "" {
		return nil, errors.New("open database: no path given")
	}
	if strings.ContainsAny(path, "?#") || strings.HasPrefix(path, "file:") || path == ":memory:" {
		// The driver reads '?' as the start of its options, and an
		// in-memory database is not shared between connections.
		return nil, fmt.Errorf("open database %s: the path must be a plain file name without '?' or '#'", path)
	}

	if opts.ReadOnly {
		return openReadOnly(ctx, path, opts)
	}
	common := "_pragma=busy_timeout(" + strconv.Itoa(busyTimeoutMS) + ")&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)"
	// The writer never checkpoints (wal_autocheckpoint 0): left to itself
	// SQLite checkpoints inside the commit that crosses 1,000 WAL pages,
	// fsyncing the database file while every caller in the batch waits —
	// the p99 of the route write. checkpointLoop does it on its own
	// connection instead.
	//
	// The writer alone opens the file through walVFSName, which gathers a
	// commit's WAL frames into one write; the others never write frames.
	vfs, err := writerVFS()
	if err != nil {
		return nil, openError(path, err)
	}
	writer, err := sql.Open("sqlite", path+"?"+common+vfs+"&_pragma=journal_mode(WAL)&_pragma=wal_autocheckpoint(0)&_txlock=immediate")
	if err != nil {
		return nil, openError(path, err)
	}
	// One connection: SQLite has one writer anyway, and owning it means the
	// group-commit goroutine never waits on another goroutine's lock.
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)
	if err := checkWAL(ctx, writer); err != nil {
		writer.Close()
		return nil, openError(path, err)
	}
	if err := migrate(ctx, writer, opts.Logger); err != nil {
		writer.Close()
		return nil, fmt.Errorf("migrate database %s: %w", path, err)
	}

	readers, err := sql.Open("sqlite", path+"?"+common+"&_pragma=query_only(1)")
	if err != nil {
		writer.Close()
		return nil, openError(path, err)
	}
	readers.SetMaxOpenConns(opts.Readers)
	readers.SetMaxIdleConns(opts.Readers)
	if err := readers.PingContext(ctx); err != nil {
		writer.Close()
		readers.Close()
		return nil, openError(path, err)
	}

	ckpt, err := sql.Open("sqlite", path+"?"+common)
	if err != nil {
		writer.Close()
		readers.Close()
		return nil, openError(path, err)
	}
	ckpt.SetMaxOpenConns(1)

	s := &Store{path: path, log: opts.Logger, now: opts.Now, readers: readers, writer: writer,
		ckpt: ckpt, stopCkpt: make(chan struct{}), ckptDone: make(chan struct{})}
	if opts.Linger == 0 {
		opts.Linger = DefaultLinger
	}
	s.batch = groupcommit.New(s.runBatch, groupcommit.Options{MaxBatch: opts.MaxBatch, Linger: max(opts.Linger, 0),
		Expect: func() int { return int(s.running.Load()) }, ExpectLinger: max(opts.Linger, cmp.Or(opts.expectLinger, ExpectLinger))})
	go s.checkpointLoop()
	return s, nil
}

// openReadOnly opens an existing database with readers alone, through a
// file: URI with mode=ro, so SQLite itself refuses every write and never
// creates the file. The path is checked first so that a missing file is
// named plainly instead of as SQLite's "unable to open".
func openReadOnly(ctx context.Context, path string, opts Options) (*Store, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open database %s: no such file (a read-only open never creates one; check --db)", path)
		}
		return nil, openError(path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, openError(path, err)
	}
	uri := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
	readers, err := sql.Open("sqlite", uri+"?mode=ro&_pragma=busy_timeout("+strconv.Itoa(busyTimeoutMS)+")&_pragma=query_only(1)")
	if err != nil {
		return nil, openError(path, err)
	}
	readers.SetMaxOpenConns(opts.Readers)
	readers.SetMaxIdleConns(opts.Readers)
	var cols int
	if err := readers.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('audit') WHERE name IN ('queue', 'step')`).Scan(&cols); err != nil {
		readers.Close()
		return nil, openError(path, err)
	}
	var chainCols int
	if err := readers.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('tlog_meta') WHERE name = 'chain_seq'`).Scan(&chainCols); err != nil {
		readers.Close()
		return nil, openError(path, err)
	}
	var tables int
	if err := readers.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = 'audit'`).Scan(&tables); err != nil || tables == 0 {
		readers.Close()
		if err == nil {
			err = errors.New("it has no audit table")
		}
		return nil, fmt.Errorf("open database %s: %w (is it a ladder database?)", path, err)
	}
	return &Store{path: path, log: opts.Logger, now: opts.Now, readers: readers, readOnly: true, noAuditStep: cols < 2, globalChain: chainCols == 0}, nil
}

// checkpointLoop copies committed WAL frames into the database file every
// checkpointEvery while there are writes. PASSIVE never blocks the writer
// or the readers; the writer starts the WAL over once it is all copied, so
// the file stays small. A failure is logged and tried again next tick.
func (s *Store) checkpointLoop() {
	defer close(s.ckptDone)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	var done int64 // batches already checkpointed
	for {
		select {
		case <-s.stopCkpt:
			return
		case <-t.C:
		}
		if n := s.batch.Stats().Batches; n != done {
			if err := s.checkpoint(context.Background(), "PASSIVE"); err != nil {
				s.log.Warn("WAL checkpoint", "path", s.path, "err", err)
				continue
			}
			done = n
		}
	}
}

// checkpoint runs one WAL checkpoint of the given mode.
func (s *Store) checkpoint(ctx context.Context, mode string) error {
	var busy, logFrames, copied int
	return s.ckpt.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &logFrames, &copied)
}

// checkWAL connects the writer, which applies the pragmas, and makes sure
// WAL mode took: without it readers would block the writer.
func checkWAL(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, not wal", mode)
	}
	return nil
}

// openError says which database could not be opened and, for the usual
// causes, what to check.
func openError(path string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_IOERR:
			return fmt.Errorf("open database %s: %w (is the directory writable?)", path, err)
		case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
			return fmt.Errorf("open database %s: %w (is it a ladder database?)", path, err)
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("open database %s: %w (another process holds a lock on it)", path, err)
		}
	}
	return fmt.Errorf("open database %s: %w", path, err)
}

// loadMigrations returns the embedded migrations, oldest first.
func loadMigrations() ([]mig.Migration, error) { return mig.Load(migrations, "migrations") }

// migrate applies every embedded migration the database lacks, oldest
// first, all in one BEGIN IMMEDIATE transaction (the writer's), so two
// processes opening a new file at once apply each migration once, and an
// upgrade that fails part-way leaves the file at the version it had: the
// binary it was written by still opens it. One commit, not one a
// migration: each commit is a sync, and the syncs were most of the time a
// new file's migrations took.
func migrate(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	applied, err := applyMigrations(ctx, db, ms)
	if err != nil {
		return err
	}
	for _, m := range applied {
		log.Info("applied migration", "migration", m.Name)
	}
	return nil
}

// applyMigrations applies the migrations of ms (oldest first) that
// schema_migrations does not list, in one transaction, and returns them;
// the first that fails rolls back every one, and the error names it.
func applyMigrations(ctx context.Context, db *sql.DB, ms []mig.Migration) ([]mig.Migration, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`); err != nil {
		return nil, fmt.Errorf("schema_migrations: %w", err)
	}
	have, newest, err := migrationVersions(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("schema_migrations: %w", err)
	}
	if err := mig.CheckNewest(ms, newest); err != nil {
		return nil, err
	}
	var applied []mig.Migration
	for _, m := range ms {
		if have[m.Version] {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
			m.Version, m.Name, fmtTime(time.Now())); err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		applied = append(applied, m)
	}
	if len(applied) == 0 {
		return nil, nil // nothing written: the rollback ends it
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit the migrations: %w", err)
	}
	return applied, nil
}

// migrationVersions returns the versions schema_migrations lists, and the
// newest of them (0 for none).
func migrationVersions(ctx context.Context, tx *sql.Tx) (have map[int]bool, newest int, err error) {
	rows, err := tx.QueryContext(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	have = map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, 0, err
		}
		have[v], newest = true, max(newest, v)
	}
	return have, newest, rows.Err()
}

// Ping reports whether the store can be read and durably written: a read
// on the reader pool, then an upsert of write_probe's one row committed
// through the group-commit writer. An empty transaction would not do: it
// commits on a full disk or a read-only file, where every real write fails.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("ping: %w", errClosed)
	}
	if err := s.readers.PingContext(ctx); err != nil {
		return fmt.Errorf("ping: %w", s.mapErr(err))
	}
	at := fmtTime(time.Now())
	if err := s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`INSERT INTO write_probe (id, at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET at = excluded.at`, at)
		return err
	}); err != nil {
		return fmt.Errorf("ping: write probe: %w", err)
	}
	return nil
}

// WriteStats reports what the store's group commit has done: commits,
// the writes in them, and its waits for more writes (metrics.StoreWrites).
// A read-only store has no writer and reports zeros.
func (s *Store) WriteStats() groupcommit.Stats {
	if s.batch == nil {
		return groupcommit.Stats{}
	}
	return s.batch.Stats()
}

// Close runs every write already queued, then closes the database. Later
// calls fail with an error wrapping ladder.ErrUnavailable. Close is safe to
// call more than once.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.readOnly {
		s.stmts.close()
		if err := s.readers.Close(); err != nil {
			return fmt.Errorf("close database %s: %w", s.path, err)
		}
		return nil
	}
	s.batch.Close()
	close(s.stopCkpt)
	<-s.ckptDone
	s.stmts.close()
	for _, st := range s.wstmts {
		st.Close()
	}
	// Copy the WAL in before closing, so the file on disk is whole by itself.
	cerr := s.checkpoint(context.Background(), "TRUNCATE")
	werr := s.writer.Close()
	rerr := s.readers.Close()
	kerr := s.ckpt.Close()
	if err := errors.Join(werr, rerr, kerr, cerr); err != nil {
		return fmt.Errorf("close database %s: %w", s.path, err)
	}
	return nil
}

// wtx is the transaction of one batch, as the ops of the batch see it.
type wtx struct {
	ctx context.Context
	tx  *sql.Tx
	s   *Store
	// stmts caches the statements prepared in this transaction: the ops of
	// a batch (and the rows of an import) run the same few statements many
	// times, and preparing is a good part of a small statement's cost.
	stmts map[string]*sql.Stmt
	// fresh are the queries this transaction prepared that are not in
	// the store's wstmts yet, to be kept there after the commit.
	fresh []string
	// head is the audit log's last seq as of this transaction's last
	// append, and heads each workspace's chain head (audit_ws_head) as
	// this transaction moved it. moved lists the workspaces whose head
	// moved since the last flush, in the order they first moved: their
	// rows in audit_ws_head are written by flush, once per batch (or per
	// op, in a batch run op by op), not once per record. Nothing in a
	// write transaction reads audit_ws_head except through heads.
	head  auditHead
	heads map[string]wsHead
	moved []string
	// fed are the leaves this transaction's appends made, published to
	// the store's feed once it commits; an op rolled back to its
	// savepoint takes its own back out (tryBatch).
	fed []leaffeed.Leaf
	// keys are the answers of activeKey in this transaction.
	keys ladder.KeyMemo
}

// activeKey is a ladder.KeyCheck inside the write's transaction: the key
// as stored now must be active at the store's clock (ladder.Key.Active),
// else ErrKeyInactive. Each key is read once per transaction; the write
// lock held since BEGIN IMMEDIATE keeps it from changing before the
// commit.
func (w *wtx) activeKey(id string) error {
	return w.keys.Check(id, w.s.now(), func(id string) (ladder.Key, bool, error) {
		k, err := scanKey(w.queryRow(`SELECT `+keyColumns+` FROM keys WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return ladder.Key{}, false, nil
		}
		return k, err == nil, err
	})
}

// flush writes what the transaction deferred: the chain heads that moved.
// It runs before the commit, and at the end of each op in a savepoint.
func (w *wtx) flush() error {
	for _, ws := range w.moved {
		h := w.heads[ws]
		if _, err := w.exec(`INSERT INTO audit_ws_head (workspace, size, hash) VALUES (?, ?, ?)
			ON CONFLICT (workspace) DO UPDATE SET size = excluded.size, hash = excluded.hash`, ws, h.size, h.hash); err != nil {
			return fmt.Errorf("audit head of %s: %w", ws, err)
		}
	}
	w.moved = w.moved[:0]
	return nil
}

// forgetHeads drops the heads kept in the transaction, after its last op
// was rolled back to its savepoint: the next append reads them afresh.
func (w *wtx) forgetHeads() {
	w.head.known, w.heads, w.moved = false, nil, w.moved[:0]
}

// auditHead is the log's last record's seq.
type auditHead struct {
	seq   int64
	known bool
}

// wsHead is a workspace's chain head: its log's size and last hash.
type wsHead struct {
	size int64
	hash string
}

// maxWriterStmts caps the statements kept on the writer's connection;
// the write statements are a few dozen fixed strings, so the cap is only
// a guard.
const maxWriterStmts = 128

// prepare returns query's statement in the transaction. A statement kept
// on the writer's connection (wstmts) is bound to the transaction without
// being parsed again (database/sql finds the connection's own prepared
// statement); parsing and planning the few statements of a batch again
// for every batch was a sixth of the writer's time.
func (w *wtx) prepare(query string) (*sql.Stmt, error) {
	if st, ok := w.stmts[query]; ok {
		return st, nil
	}
	var (
		st  *sql.Stmt
		err error
	)
	if kept, ok := w.s.wstmts[query]; ok {
		st = w.tx.StmtContext(w.ctx, kept)
	} else {
		st, err = w.tx.PrepareContext(w.ctx, query)
		if err != nil {
			return nil, err
		}
		w.fresh = append(w.fresh, query)
	}
	if w.stmts == nil {
		w.stmts = map[string]*sql.Stmt{}
	}
	w.stmts[query] = st
	return st, nil
}

// keepStmts prepares the queries the committed transaction w prepared
// afresh on the writer's connection, now free again, for the batches
// after it. A query that fails to prepare is simply not kept.
func (s *Store) keepStmts(w *wtx) {
	for _, q := range w.fresh {
		if len(s.wstmts) >= maxWriterStmts {
			return
		}
		st, err := s.writer.PrepareContext(w.ctx, q)
		if err != nil {
			continue
		}
		if s.wstmts == nil {
			s.wstmts = map[string]*sql.Stmt{}
		}
		s.wstmts[q] = st
	}
}

func (w *wtx) exec(query string, args ...any) (sql.Result, error) {
	st, err := w.prepare(query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(w.ctx, args...)
}

// row is a *sql.Row or the error of preparing it.
type row struct {
	r   *sql.Row
	err error
}

// Scan implements scanner.
func (r row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return r.r.Scan(dest...)
}

func (w *wtx) queryRow(query string, args ...any) row {
	st, err := w.prepare(query)
	if err != nil {
		return row{err: err}
	}
	return row{r: st.QueryRowContext(w.ctx, args...)}
}

func (w *wtx) query(query string, args ...any) (*sql.Rows, error) {
	st, err := w.prepare(query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(w.ctx, args...)
}

// runBatch is the group-commit run function: one BEGIN IMMEDIATE, the ops
// one after another, one COMMIT.
//
// A batch of several ops first runs optimistically, without savepoints:
// nearly every op succeeds, and a savepoint per op costs two statements
// and a copy of every page the op touches (SQLite's sub-journal). When an
// op fails, or the batch's deferred writes do (flush), the transaction is
// rolled back and the batch runs again with each op in its own savepoint,
// so the failing op is undone alone. Ops are closures that set, never
// accumulate, their results, so running one again is safe (the PostgreSQL
// store runs them again the same way).
func (s *Store) runBatch(ctx context.Context, ops []groupcommit.Op[*wtx]) []error {
	if len(ops) > 1 {
		errs, err := s.tryBatch(ctx, ops, false)
		if !errors.Is(err, errOpFailed) {
			return errs
		}
	}
	errs, _ := s.tryBatch(ctx, ops, true)
	return errs
}

// errOpFailed ends an optimistic run of a batch in which an op failed.
var errOpFailed = errors.New("an op of the batch failed")

// tryBatch runs the batch in one transaction: with safe, a lone op as it
// is and several each in a savepoint; without, all of them as they are,
// failing with errOpFailed (nothing committed) when one of them fails. Any
// other error has failed the whole batch and is in every op's result.
func (s *Store) tryBatch(ctx context.Context, ops []groupcommit.Op[*wtx], safe bool) ([]error, error) {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		s.log.Error("begin write batch", "ops", len(ops), "err", err)
		return groupcommit.Fail(len(ops), fmt.Errorf("begin: %w", err)), err
	}
	w := &wtx{ctx: ctx, tx: tx, s: s}
	var errs []error
	switch {
	case !safe:
		for _, op := range ops {
			if err := op(w); err != nil {
				_ = tx.Rollback()
				return nil, errOpFailed
			}
		}
		if err := w.flush(); err != nil {
			_ = tx.Rollback()
			return nil, errOpFailed
		}
		errs = make([]error, len(ops))
	case len(ops) == 1:
		// Alone in the batch, an op needs no savepoint: if it fails, the
		// whole transaction rolls back.
		err := ops[0](w)
		if err == nil {
			err = w.flush()
		}
		if err != nil {
			_ = tx.Rollback()
			return []error{err}, nil
		}
		errs = []error{nil}
	default:
		// Each op's deferred writes are made inside its savepoint. An op
		// rolled back to its savepoint may have appended to the chains:
		// forget the heads, and the next append reads them afresh.
		guarded := make([]groupcommit.Op[*wtx], len(ops))
		for i, op := range ops {
			guarded[i] = func(w *wtx) error {
				fed := len(w.fed)
				err := op(w)
				if err == nil {
					err = w.flush()
				}
				if err != nil {
					w.forgetHeads()
					w.fed = w.fed[:fed]
				}
				return err
			}
		}
		var fatal error
		errs, fatal = groupcommit.Savepoints(w, guarded, func(stmt string) error {
			_, err := w.exec(stmt)
			return err
		})
		if fatal != nil {
			_ = tx.Rollback()
			s.log.Error("write batch failed", "ops", len(ops), "err", fatal)
			return groupcommit.Fail(len(ops), fatal), fatal
		}
	}
	if err := tx.Commit(); err != nil {
		// A failed COMMIT can leave SQLite's transaction open on the
		// connection (database/sql considers it done either way), and the
		// next BEGIN would fail forever; end it, ignoring "no transaction".
		_, _ = s.writer.ExecContext(ctx, "ROLLBACK")
		s.log.Error("commit write batch", "ops", len(ops), "err", err)
		return groupcommit.Fail(len(ops), fmt.Errorf("commit: %w", err)), err
	}
	s.feed.Publish(w.fed)
	if len(w.fresh) > 0 {
		s.keepStmts(w)
	}
	return errs, nil
}

// write runs op in a group-commit batch and returns once it is durable.
func (s *Store) write(ctx context.Context, op func(w *wtx) error) error {
	return s.writeOp(ctx, op, false)
}

// writeCall is write for a call's begin or result. While many calls run,
// a batch of these alone waits up to ExpectLinger for the others' results
// (groupcommit's DoPatient), since their callers wait on an upstream
// anyway; any other write in the batch cuts the wait to Options.Linger.
func (s *Store) writeCall(ctx context.Context, op func(w *wtx) error) error {
	return s.writeOp(ctx, op, true)
}

func (s *Store) writeOp(ctx context.Context, op func(w *wtx) error, call bool) error {
	if s.closed.Load() {
		return errClosed
	}
	if s.readOnly {
		return errReadOnly
	}
	op, done := ladder.KeyCheckedOp(ctx, op, (*wtx).activeKey)
	do := s.batch.Do
	if call {
		do = s.batch.DoPatient
	}
	err := do(ctx, op)
	done(err)
	return s.mapErr(err)
}

// errClosed is the error of a call on a closed store.
var errClosed = fmt.Errorf("%w: store closed", ladder.ErrUnavailable)

// errReadOnly is the error of a write on a store opened read-only.
var errReadOnly = fmt.Errorf("%w: the database was opened read-only", ladder.ErrUnavailable)

// mapErr turns driver errors into the store's sentinel errors: a unique or
// check constraint is ErrConflict, anything that means the database cannot
// durably write (disk full, read-only, I/O error, locked out, closed) is
// ErrUnavailable. The driver's error stays wrapped for the log.
func (s *Store) mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ladder.ErrNotFound), errors.Is(err, ladder.ErrConflict), errors.Is(err, ladder.ErrUnavailable):
		return err
	case errors.Is(err, groupcommit.ErrClosed), errors.Is(err, sql.ErrConnDone):
		return fmt.Errorf("%w: %w", ladder.ErrUnavailable, err)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CONSTRAINT:
			return fmt.Errorf("%w: %w", ladder.ErrConflict, err)
		case sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN,
			sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB,
			sqlite3.SQLITE_PERM, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_PROTOCOL:
			return fmt.Errorf("%w: %w", ladder.ErrUnavailable, err)
		}
	}
	if s.closed.Load() {
		return fmt.Errorf("%w: %w", ladder.ErrUnavailable, err)
	}
	return err
}

// read maps a read's error; sql.ErrNoRows becomes ErrNotFound.
func (s *Store) readErr(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return ladder.ErrNotFound
	}
	return s.mapErr(err)
}

// timeLayout is RFC 3339 at a fixed microsecond width, so stored times sort
// as text and parse back with time.RFC3339Nano.
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

// normTime is the time as the store keeps it: UTC, microseconds.
func normTime(t time.Time) time.Time { return ladder.NormTime(t) }

// fmtTime is t as the store writes it: "" for the zero time, else
// normTime(t) in timeLayout. Every write formats a time or three, and
// Format reads its layout afresh each call (a few thousand instructions);
// the fixed-width UTC form is written here digit by digit, and any year
// Format would not write in four digits goes to Format itself.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	t = normTime(t)
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.Format(timeLayout)
	}
	hour, minute, sec := t.Clock()
	var b [len("2006-01-02T15:04:05.000000Z")]byte
	digits(b[0:4], year)
	b[4] = '-'
	digits(b[5:7], int(month))
	b[7] = '-'
	digits(b[8:10], day)
	b[10] = 'T'
	digits(b[11:13], hour)
	b[13] = ':'
	digits(b[14:16], minute)
	b[16] = ':'
	digits(b[17:19], sec)
	b[19] = '.'
	digits(b[20:26], t.Nanosecond()/1000)
	b[26] = 'Z'
	return string(b[:])
}

// digits writes n's last len(b) decimal digits into b, zero-padded.
func digits(b []byte, n int) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + n%10)
		n /= 10
	}
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored time %q: %w", s, err)
	}
	return t.UTC(), nil
}

func fmtTimePtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return fmtTime(*t)
}

func parseTimePtr(s sql.NullString) (*time.Time, error) {
	if !s.Valid {
		return nil, nil
	}
	t, err := parseTime(s.String)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// nullBytes stores an empty JSON value as NULL so it reads back as nil.
func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

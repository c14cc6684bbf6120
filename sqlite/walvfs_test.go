//go:build unix

package sqlite

import (
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// openWALVFS opens path through the gathering VFS the way the store's
// writer does, plus extra pragmas, on one connection.
func openWALVFS(t *testing.T, path string, pragmas ...string) *sql.DB {
	t.Helper()
	vfs, err := writerVFS()
	if err != nil || vfs == "" {
		t.Fatalf("the gathering VFS is not available (%v)", err)
	}
	dsn := path + "?" + vfs[1:] + "&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=wal_autocheckpoint(0)"
	for _, p := range pragmas {
		dsn += "&_pragma=" + p
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// openPlain opens path through SQLite's own VFS: another process, or
// the store's readers.
func openPlain(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// A commit that dirties many pages reaches the WAL in one write, where
// SQLite alone makes two a page; and what it wrote is there for a
// connection through SQLite's own VFS the moment the commit returns.
func TestWALCommitIsOneWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	db := openWALVFS(t, path)
	mustExec(t, db, `CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)`)
	mustExec(t, db, `CREATE INDEX t_v ON t(v)`)
	reader := openPlain(t, path)

	before := walWrites.Load()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 { // a 3,000-byte row a page, twice over (table and index)
		if _, err := tx.Exec(`INSERT INTO t(k, v) VALUES (?, ?)`, i, strings.Repeat(string(rune('a'+i)), 3000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := walWrites.Load() - before; got != 1 {
		t.Errorf("a commit of 24 or more pages made %d writes to the WAL, want 1", got)
	}
	var n int
	if err := reader.QueryRow(`SELECT COUNT(*) FROM t WHERE length(v) = 3000`).Scan(&n); err != nil || n != 12 {
		t.Fatalf("another connection sees %d rows (%v) after the commit, want 12", n, err)
	}
}

// The frames are in the file when the commit returns even when SQLite
// does not sync it (synchronous=OFF): another connection, which finds
// them through the wal-index, reads every commit at once.
func TestWALCommitIsWrittenWithoutSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	db := openWALVFS(t, path, "synchronous(OFF)")
	mustExec(t, db, `CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)`)
	reader := openPlain(t, path)
	for i := range 20 {
		before := walWrites.Load()
		mustExec(t, db, `INSERT INTO t(k, v) VALUES (?, randomblob(6000))`, i)
		if got := walWrites.Load() - before; got != 1 {
			t.Errorf("commit %d made %d writes to the WAL, want 1", i, got)
		}
		var n int
		var sum int64
		if err := reader.QueryRow(`SELECT COUNT(*), SUM(length(v)) FROM t`).Scan(&n, &sum); err != nil || n != i+1 || sum != int64(6000*(i+1)) {
			t.Fatalf("after commit %d another connection reads %d rows of %d bytes in all (%v), want %d of %d", i, n, sum, err, i+1, 6000*(i+1))
		}
	}
}

// Transactions larger than the page cache spill uncommitted frames and
// rewrite them, reading them back to checksum them again; larger than
// the buffer, they are written out in pieces; rolled back, their frames
// are abandoned. Through all of it the committed rows, and only they,
// survive a reopen through SQLite's own VFS, and the file is sound.
func TestWALSpillsRollbacksAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	db := openWALVFS(t, path, "cache_size(8)")
	mustExec(t, db, `CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)`)
	mustExec(t, db, `CREATE INDEX t_v ON t(v)`)

	insert := func(from, to int, commit bool) {
		t.Helper()
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for i := from; i < to; i++ {
			if _, err := tx.Exec(`INSERT INTO t(k, v) VALUES (?, randomblob(1500))`, i); err != nil {
				t.Fatal(err)
			}
			// Touch an early row again so a spilled page is written twice.
			if _, err := tx.Exec(`UPDATE t SET v = randomblob(1500) WHERE k = ?`, from); err != nil {
				t.Fatal(err)
			}
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	insert(0, 400, true)    // ~600 KB: spills, and more than one buffer
	insert(400, 800, false) // abandoned after spilling
	insert(800, 1000, true) // written where the abandoned frames were
	mustExec(t, db, `INSERT INTO t(k, v) VALUES (5000, x'00')`)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	plain := openPlain(t, path)
	var check string
	if err := plain.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check after reopen: %q, %v", check, err)
	}
	var n, inAbandoned int
	if err := plain.QueryRow(`SELECT COUNT(*), COUNT(*) FILTER (WHERE k >= 400 AND k < 800) FROM t`).Scan(&n, &inAbandoned); err != nil {
		t.Fatal(err)
	}
	if n != 601 || inAbandoned != 0 {
		t.Fatalf("after reopen: %d rows, %d of the rolled-back ones; want 601 and 0", n, inAbandoned)
	}
}

// A WAL that cannot be written (the file may not grow: a full disk, as
// far as SQLite can tell) fails the commit with SQLite's I/O error, the
// rows committed before it stay, and nothing of it is visible. The
// limit on file size is the process's own, so the test runs itself
// again as a child, which sets it.
func TestWALWriteFailureFailsTheCommit(t *testing.T) {
	if dir := os.Getenv("LADDER_WALVFS_FULL_DIR"); dir != "" {
		walWriteFailureChild(t, dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestWALWriteFailureFailsTheCommit$", "-test.v")
	cmd.Env = append(os.Environ(), "LADDER_WALVFS_FULL_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("the child with a file size limit failed (%v):\n%s", err, out)
	}
	db := openPlain(t, filepath.Join(dir, "w.db"))
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM t`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("reopened after the failed commit: %d rows (%v), want the 3 committed before it", n, err)
	}
}

func walWriteFailureChild(t *testing.T, dir string) {
	path := filepath.Join(dir, "w.db")
	db := openWALVFS(t, path)
	mustExec(t, db, `CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)`)
	for i := range 3 {
		mustExec(t, db, `INSERT INTO t(k, v) VALUES (?, randomblob(100))`, i)
	}
	st, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// Past the limit a write fails with EFBIG (and SIGXFSZ, which would
	// otherwise end the process).
	signal.Ignore(syscall.SIGXFSZ)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = uint64(st.Size()) + 2048
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skipf("cannot limit file size here: %v", err)
	}
	_, err = db.Exec(`INSERT INTO t(k, v) VALUES (10, randomblob(20000))`)
	var se *sqlite.Error
	if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_IOERR && se.Code()&0xff != sqlite3.SQLITE_FULL {
		t.Fatalf("a commit whose WAL cannot be written answered %v, want SQLite's I/O or full-disk error", err)
	}
	t.Logf("the commit past the limit answered: %v", err)
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM t`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("the writer after the failed commit: %d rows (%v), want 3", n, err)
	}
}

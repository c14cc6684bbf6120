package sqlite

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// walVFSName is the SQLite VFS the writer connection opens its database
// through: SQLite's own "unix" VFS, except that a transaction's writes to
// the WAL file are gathered in memory and reach the kernel in one pwrite
// when its commit frame is complete (or SQLite does anything else to the
// file first).
//
// Why: SQLite writes every WAL frame as two pwrites, its 24-byte header
// and then the page, and no pragma changes that. A commit of the group
// commit's batch writes a dozen or more frames, so it made two dozen
// syscalls before its one fsync; profiles of route_item put 9% of
// ladder's CPU in those pwrites (BENCHMARKS.md, session 19). With the
// frames gathered the commit makes one pwrite and the same fsync.
//
// Why it is safe: bytes are held only while SQLite is still writing one
// transaction's frames through the one WAL handle. They are written out
// as soon as the commit frame (the one whose header carries the
// database's new size) is complete, and before any other operation on
// the handle (read, sync, truncate, size, file control, close) or a write
// that does not continue them. So they are in the file before the commit's
// fsync and before SQLite publishes the commit's frames in the wal-index,
// where other connections (the readers, the checkpointer, a CLI process)
// find them, whatever the synchronous setting; until then no other handle
// may read those frames. A process killed while holding them loses only
// frames of a commit not yet acknowledged, as if it had been killed
// before the pwrites. SQLite reads back frames it has written (to
// recompute checksums after a cache spill) through the same handle,
// which writes them out first.
const walVFSName = "ladder-walbuf"

// walBufCap is the most a WAL handle holds before writing it out: 31
// frames of 4 KiB pages, more than a group commit's batch usually
// dirties. It is also the most one write may carry: the unix VFS masks a
// write's length with 0x1ffff before its pwrite (seekAndWriteFd), so a
// longer one would be cut short and reported as a full disk.
const walBufCap = 0x1ffff

// walVFS is the registered VFS and what its functions need to reach the
// unix VFS underneath.
var walVFS struct {
	once sync.Once
	err  error
	real uintptr // the unix VFS
	// off is where a WAL handle's walFile sits: after the unix VFS's own
	// file structure, in the block SQLite allocates of vfs.FszOsFile.
	off uintptr

	mu sync.Mutex
	// methods maps the unix VFS's I/O methods (it has several, chosen
	// per file) to the copy whose write path gathers.
	methods map[uintptr]uintptr
}

// walWrites counts the writes that reached the unix VFS for WAL files,
// so tests can see that a commit's frames went out together.
var walWrites atomic.Int64

// walFile is this VFS's state for one open WAL file, kept in C memory
// after the unix VFS's file structure. Only the connection that owns
// the handle touches it, and SQLite serialises a connection's calls.
type walFile struct {
	// real is the unix VFS's methods for the file, which every wrapped
	// method calls through.
	real uintptr
	// buf holds n bytes that belong at offset off of the file; it is
	// allocated (walBufCap bytes) at the first write and freed at close.
	buf uintptr
	n   int64
	off int64
	// commit is set when the last write was a commit frame's header:
	// the next, its page, ends the transaction's frames.
	commit bool
}

// walFrameHeader is the size of a WAL frame's header.
const walFrameHeader = 24

// writerVFS registers walVFSName once per process and returns the DSN
// parameter that opens a connection through it; "" where SQLite has no
// unix VFS to build on (Windows), and the writer uses SQLite's default.
// The error says why SQLite would not register it.
func writerVFS() (string, error) {
	walVFS.once.Do(func() { walVFS.err = registerWALVFS() })
	if walVFS.err != nil || walVFS.real == 0 {
		return "", walVFS.err
	}
	return "&vfs=" + walVFSName, nil
}

func registerWALVFS() error {
	tls := libc.NewTLS()
	defer tls.Close()
	name, err := libc.CString("unix")
	if err != nil {
		return err
	}
	defer libc.Xfree(tls, name)
	real := sqlite3.Xsqlite3_vfs_find(tls, name)
	if real == 0 {
		return nil
	}
	ours, err := libc.CString(walVFSName) // lives as long as the process
	if err != nil {
		return err
	}
	// What SQLite reads is in C memory, as its own structures are: Go's
	// pointer checks (-race) refuse its arithmetic on Go's memory. It is
	// registered for the process's life, so never freed.
	p := cAlloc[sqlite3.Tsqlite3_vfs](tls)
	if p == 0 {
		return fmt.Errorf("register %s VFS: out of memory", walVFSName)
	}
	vfs := at[sqlite3.Tsqlite3_vfs](p)
	*vfs = *at[sqlite3.Tsqlite3_vfs](real)
	walVFS.real = real
	walVFS.methods = make(map[uintptr]uintptr)
	walVFS.off = (uintptr(vfs.FszOsFile) + 7) &^ 7
	vfs.FszOsFile = int32(walVFS.off + unsafe.Sizeof(walFile{}))
	vfs.FpNext = 0
	vfs.FzName = ours
	vfs.FxOpen = cFunc(walOpen)
	if rc := sqlite3.Xsqlite3_vfs_register(tls, p, 0); rc != sqlite3.SQLITE_OK {
		walVFS.real = 0
		return fmt.Errorf("register %s VFS: SQLite answered %d", walVFSName, rc)
	}
	return nil
}

// walOpen is the VFS's xOpen: the unix VFS opens every file, and a WAL
// file's methods are swapped for the gathering ones.
func walOpen(tls *libc.TLS, _ uintptr, zName uintptr, pFile uintptr, flags int32, pOutFlags uintptr) int32 {
	open := goFunc[func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32](at[sqlite3.Tsqlite3_vfs](walVFS.real).FxOpen)
	// The unix VFS's own pointer: it keeps it in the file and reads its
	// lock finder from it.
	rc := open(tls, walVFS.real, zName, pFile, flags, pOutFlags)
	file := at[sqlite3.Tsqlite3_file](pFile)
	if rc != sqlite3.SQLITE_OK || flags&sqlite3.SQLITE_OPEN_WAL == 0 || file.FpMethods == 0 {
		return rc
	}
	m := gatheringMethods(tls, file.FpMethods)
	if m == 0 {
		return rc // no memory for the table: the file stays the unix VFS's
	}
	*at[walFile](pFile + walVFS.off) = walFile{real: file.FpMethods}
	file.FpMethods = m
	return rc
}

// gatheringMethods returns the copy of the unix VFS's methods real whose
// data methods go through walFile first; the others (locks, shared
// memory, sector size) stay the unix VFS's, which find their file
// structure where they left it.
func gatheringMethods(tls *libc.TLS, real uintptr) uintptr {
	walVFS.mu.Lock()
	defer walVFS.mu.Unlock()
	if p, ok := walVFS.methods[real]; ok {
		return p
	}
	p := cAlloc[sqlite3.Tsqlite3_io_methods](tls)
	if p == 0 {
		return 0
	}
	m := at[sqlite3.Tsqlite3_io_methods](p)
	*m = *at[sqlite3.Tsqlite3_io_methods](real)
	m.FxClose = cFunc(walClose)
	m.FxRead = cFunc(walRead)
	m.FxWrite = cFunc(walWrite)
	m.FxTruncate = cFunc(walTruncate)
	m.FxSync = cFunc(walSync)
	m.FxFileSize = cFunc(walFileSize)
	m.FxFileControl = cFunc(walFileControl)
	walVFS.methods[real] = p // kept for the process's life: files point at it
	return p
}

// walWrite is xWrite: a write that continues the held bytes joins them;
// any other first writes the held bytes out.
func walWrite(tls *libc.TLS, pFile, pBuf uintptr, amt int32, off int64) int32 {
	f := at[walFile](pFile + walVFS.off)
	if f.n > 0 && (off != f.off+f.n || f.n+int64(amt) > walBufCap) {
		if rc := f.flush(tls, pFile); rc != sqlite3.SQLITE_OK {
			return rc
		}
	}
	if int64(amt) > walBufCap {
		return f.write(tls, pFile, pBuf, amt, off)
	}
	if f.buf == 0 {
		if f.buf = libc.Xmalloc(tls, walBufCap); f.buf == 0 {
			return f.write(tls, pFile, pBuf, amt, off)
		}
	}
	if f.n == 0 {
		f.off = off
	}
	libc.Xmemcpy(tls, f.buf+uintptr(f.n), pBuf, uint64(amt))
	f.n += int64(amt)
	if f.commit {
		// The page of a commit frame: the commit is complete.
		f.commit = false
		return f.flush(tls, pFile)
	}
	// A frame's header is 24 bytes (the WAL's own is 32, a page at least
	// 512); its second word, the database's size after the commit, is
	// nonzero only in a transaction's last frame.
	f.commit = amt == walFrameHeader && *at[uint32](pBuf + 4) != 0
	return sqlite3.SQLITE_OK
}

// flush writes the held bytes out. They are dropped whatever the answer:
// after a failed write SQLite abandons the transaction they belong to.
func (f *walFile) flush(tls *libc.TLS, pFile uintptr) int32 {
	if f.n == 0 {
		return sqlite3.SQLITE_OK
	}
	n := f.n
	f.n, f.commit = 0, false
	return f.write(tls, pFile, f.buf, int32(n), f.off)
}

func (f *walFile) write(tls *libc.TLS, pFile, pBuf uintptr, amt int32, off int64) int32 {
	walWrites.Add(1)
	return goFunc[func(*libc.TLS, uintptr, uintptr, int32, int64) int32](at[sqlite3.Tsqlite3_io_methods](f.real).FxWrite)(tls, pFile, pBuf, amt, off)
}

// flushed writes out what pFile's handle holds and returns the unix
// VFS's methods for the file, for a method to carry on with; or SQLite's
// error for the failed write.
func flushed(tls *libc.TLS, pFile uintptr) (*sqlite3.Tsqlite3_io_methods, int32) {
	f := at[walFile](pFile + walVFS.off)
	return at[sqlite3.Tsqlite3_io_methods](f.real), f.flush(tls, pFile)
}

func walSync(tls *libc.TLS, pFile uintptr, flags int32) int32 {
	real, rc := flushed(tls, pFile)
	if rc != sqlite3.SQLITE_OK {
		return rc
	}
	return goFunc[func(*libc.TLS, uintptr, int32) int32](real.FxSync)(tls, pFile, flags)
}

func walRead(tls *libc.TLS, pFile, pBuf uintptr, amt int32, off int64) int32 {
	real, rc := flushed(tls, pFile)
	if rc != sqlite3.SQLITE_OK {
		return rc
	}
	return goFunc[func(*libc.TLS, uintptr, uintptr, int32, int64) int32](real.FxRead)(tls, pFile, pBuf, amt, off)
}

func walTruncate(tls *libc.TLS, pFile uintptr, size int64) int32 {
	real, rc := flushed(tls, pFile)
	if rc != sqlite3.SQLITE_OK {
		return rc
	}
	return goFunc[func(*libc.TLS, uintptr, int64) int32](real.FxTruncate)(tls, pFile, size)
}

func walFileSize(tls *libc.TLS, pFile, pSize uintptr) int32 {
	real, rc := flushed(tls, pFile)
	if rc != sqlite3.SQLITE_OK {
		return rc
	}
	return goFunc[func(*libc.TLS, uintptr, uintptr) int32](real.FxFileSize)(tls, pFile, pSize)
}

func walFileControl(tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32 {
	real, rc := flushed(tls, pFile)
	if rc != sqlite3.SQLITE_OK {
		return rc
	}
	return goFunc[func(*libc.TLS, uintptr, int32, uintptr) int32](real.FxFileControl)(tls, pFile, op, pArg)
}

// walClose writes the held bytes out (SQLite closes the WAL only after
// its last commit, so there are none unless a transaction was abandoned)
// and frees the buffer before the unix VFS closes the file.
func walClose(tls *libc.TLS, pFile uintptr) int32 {
	f := at[walFile](pFile + walVFS.off)
	rc := f.flush(tls, pFile)
	if f.buf != 0 {
		libc.Xfree(tls, f.buf)
	}
	real := f.real
	*f = walFile{}
	if crc := goFunc[func(*libc.TLS, uintptr) int32](at[sqlite3.Tsqlite3_io_methods](real).FxClose)(tls, pFile); rc == sqlite3.SQLITE_OK {
		rc = crc
	}
	return rc
}

// at reads p, an address in SQLite's C memory (outside Go's heap, never
// moved or collected), as a *T.
func at[T any](p uintptr) *T { return *(**T)(unsafe.Pointer(&p)) }

// cAlloc allocates a T in C memory, or returns 0.
func cAlloc[T any](tls *libc.TLS) uintptr {
	var zero T
	return libc.Xmalloc(tls, uint64(unsafe.Sizeof(zero)))
}

// cFunc turns a top-level function into the pointer SQLite's translated
// C calls: a Go func value is a pointer to its static closure.
func cFunc[F any](f F) uintptr { return *(*uintptr)(unsafe.Pointer(&f)) }

// goFunc is cFunc's inverse: the function SQLite's pointer p stands for,
// as an F, the function's signature in the translated C.
func goFunc[F any](p uintptr) F { return *(*F)(unsafe.Pointer(&p)) }

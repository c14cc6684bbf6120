// Package logbuf gathers a server's log lines of one kind (the access log:
// a line for every request) and writes them out together, a few times a
// second, instead of one write(2) a line.
//
// Why: at thousands of requests a second the access log's write per
// request was 3% of ladder's CPU under route_item (BENCHMARKS.md, issue
// 22, session 33). Every other line (start-up, warnings, errors, a
// panic) goes through Immediate, which writes the gathered lines first
// and then its own at once, so the output keeps the order the lines were
// logged in and nothing but access lines ever waits.
//
// What waits is bounded: at most Delay, or MaxBuffered bytes, whichever
// comes first; Flush writes it out (the server calls it as it stops). A
// process killed outright (kill -9, out of memory) loses the access lines
// of its last Delay; the audit log, not the access log, is ladder's
// record of what it did.
package logbuf

import (
	"io"
	"sync"
	"time"
)

// Delay is the longest a gathered line waits before it is written.
const Delay = 50 * time.Millisecond

// MaxBuffered is how many bytes are gathered at most: a write that takes
// the buffer past it writes everything out at once (about 200 access
// lines).
const MaxBuffered = 32 << 10

// Writer gathers what is written to it and writes it to the underlying
// writer within Delay. It is safe for concurrent use; each Write's bytes
// stay together, as each of a slog handler's lines does.
type Writer struct {
	w     io.Writer
	delay time.Duration

	mu    sync.Mutex
	buf   []byte
	timer *time.Timer // armed while buf holds bytes
}

// New returns a Writer writing to w.
func New(w io.Writer) *Writer { return newWithDelay(w, Delay) }

// newWithDelay is New with another delay (tests that must not race it).
func newWithDelay(w io.Writer, delay time.Duration) *Writer {
	b := &Writer{w: w, delay: delay}
	b.timer = time.AfterFunc(time.Hour, func() { _ = b.Flush() })
	b.timer.Stop()
	return b
}

// Write gathers p. It reports an error only when p took the buffer past
// MaxBuffered and writing it out failed.
func (b *Writer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) == 0 {
		b.timer.Reset(b.delay)
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) < MaxBuffered {
		return len(p), nil
	}
	if err := b.flushLocked(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes out everything gathered.
func (b *Writer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

// flushLocked writes the buffer out, keeping its storage unless a burst
// grew it past MaxBuffered. A failed write drops the lines, as a failed
// write of each line on its own would have.
func (b *Writer) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	b.timer.Stop()
	_, err := b.w.Write(b.buf)
	if cap(b.buf) > 2*MaxBuffered {
		b.buf = nil
	} else {
		b.buf = b.buf[:0]
	}
	return err
}

// Immediate returns a writer to the same output that writes at once: what
// b has gathered, then its own bytes, in one write.
func (b *Writer) Immediate() io.Writer { return immediate{b} }

type immediate struct{ b *Writer }

func (i immediate) Write(p []byte) (int, error) {
	b := i.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) == 0 {
		return b.w.Write(p)
	}
	b.buf = append(b.buf, p...)
	if err := b.flushLocked(); err != nil {
		return 0, err
	}
	return len(p), nil
}

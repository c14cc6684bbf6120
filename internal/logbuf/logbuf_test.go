package logbuf

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is an output that keeps each write apart.
type recorder struct {
	mu     sync.Mutex
	writes []string
	fail   error
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return 0, r.fail
	}
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func (r *recorder) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.writes, "")
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.writes)
}

// TestLinesKeepTheirOrder: access lines wait, and a line written at once
// goes out after them, in the order both were logged, in one write.
func TestLinesKeepTheirOrder(t *testing.T) {
	out := &recorder{}
	b := newWithDelay(out, time.Hour)
	fmt.Fprintln(b, "request 1")
	fmt.Fprintln(b, "request 2")
	if out.count() != 0 {
		t.Fatalf("gathered lines written at once: %q", out.writes)
	}
	fmt.Fprintln(b.Immediate(), "warning")
	fmt.Fprintln(b, "request 3")
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(b.Immediate(), "stopped")
	want := []string{"request 1\nrequest 2\nwarning\n", "request 3\n", "stopped\n"}
	if fmt.Sprint(out.writes) != fmt.Sprint(want) {
		t.Fatalf("writes %q, want %q", out.writes, want)
	}
}

// TestGatheredLinesGoOutByThemselves: with nothing else logged, an access
// line still reaches the output, soon after Delay.
func TestGatheredLinesGoOutByThemselves(t *testing.T) {
	out := &recorder{}
	b := New(out)
	fmt.Fprintln(b, "request 1")
	deadline := time.Now().Add(10 * time.Second)
	for out.text() != "request 1\n" {
		if time.Now().After(deadline) {
			t.Fatalf("the gathered line was never written: %q", out.text())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The timer is armed again by the next line.
	fmt.Fprintln(b, "request 2")
	for out.text() != "request 1\nrequest 2\n" {
		if time.Now().After(deadline) {
			t.Fatalf("the second gathered line was never written: %q", out.text())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBufferIsBounded: past MaxBuffered the lines are written at once, so
// a burst holds at most MaxBuffered plus one line.
func TestBufferIsBounded(t *testing.T) {
	out := &recorder{}
	b := newWithDelay(out, time.Hour)
	line := strings.Repeat("x", 199) + "\n"
	n := 3 * MaxBuffered / len(line)
	for range n {
		b.Write([]byte(line))
	}
	if out.count() < 2 {
		t.Fatalf("%d writes for %d bytes, want the buffer written out each time it passes %d", out.count(), n*len(line), MaxBuffered)
	}
	for _, w := range out.writes {
		if len(w) > MaxBuffered+len(line) {
			t.Fatalf("a write of %d bytes, more than MaxBuffered and a line", len(w))
		}
	}
	b.Flush()
	if got := out.text(); got != strings.Repeat(line, n) {
		t.Fatalf("%d bytes out, want %d", len(got), n*len(line))
	}
}

// TestConcurrentLinesStayWhole: slog loggers on both writers, used at
// once, give whole lines, every one of them.
func TestConcurrentLinesStayWhole(t *testing.T) {
	out := &recorder{}
	b := newWithDelay(out, time.Hour)
	access := slog.New(slog.NewJSONHandler(b, nil))
	log := slog.New(slog.NewJSONHandler(b.Immediate(), nil))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				if i%50 == 0 {
					log.Warn("slow", "g", g, "i", i)
				} else {
					access.Info("request", "g", g, "i", i)
				}
			}
		})
	}
	wg.Wait()
	b.Flush()
	lines := strings.Split(strings.TrimSuffix(out.text(), "\n"), "\n")
	if len(lines) != 8*500 {
		t.Fatalf("%d lines, want %d", len(lines), 8*500)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, `{"time":`) || !strings.HasSuffix(l, "}") {
			t.Fatalf("a broken line: %q", l)
		}
	}
}

// TestFailedWrite: a failed write is reported where it happens, drops
// only the lines it carried, and the writer goes on.
func TestFailedWrite(t *testing.T) {
	out := &recorder{fail: errors.New("disk full")}
	b := newWithDelay(out, time.Hour)
	fmt.Fprintln(b, "request 1")
	if _, err := fmt.Fprintln(b.Immediate(), "error"); err == nil {
		t.Fatal("a failed write reported no error")
	}
	out.mu.Lock()
	out.fail = nil
	out.mu.Unlock()
	fmt.Fprintln(b, "request 2")
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := out.text(); got != "request 2\n" {
		t.Fatalf("after the failure: %q", got)
	}
}

// TestEmptyFlush writes nothing.
func TestEmptyFlush(t *testing.T) {
	var out bytes.Buffer
	b := newWithDelay(&out, time.Hour)
	if err := b.Flush(); err != nil || out.Len() != 0 {
		t.Fatalf("Flush of nothing: %v, %q", err, out.String())
	}
}

package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
)

// pingStore is a store whose Ping and AppendAudit do what the test says;
// every other method is unused.
type pingStore struct {
	ladder.Store
	pings  atomic.Int64
	ping   func(ctx context.Context) error
	append error
}

func (s *pingStore) Ping(ctx context.Context) error {
	s.pings.Add(1)
	return s.ping(ctx)
}

func (s *pingStore) AppendAudit(context.Context, ...ladder.AuditEntry) ([]ladder.AuditRecord, error) {
	return nil, s.append
}

func newReadyService(t *testing.T, st *pingStore) *Service {
	t.Helper()
	s, err := New(Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReadyProbesOnceAtATime: many concurrent Ready calls with no fresh
// evidence share one probe, and a probe that never returns (a Ping queued
// behind a stuck write batch) still lets every Ready answer within its
// deadline, with one probe outstanding however many callers ask.
func TestReadyProbesOnceAtATime(t *testing.T) {
	release := make(chan struct{})
	st := &pingStore{ping: func(ctx context.Context) error {
		<-release // ignores ctx, as group commit does once an op is queued
		return nil
	}}
	s := newReadyService(t, st)
	var wg sync.WaitGroup
	start := time.Now()
	for range 20 {
		wg.Go(func() {
			err := s.Ready(t.Context())
			if le := (*ladder.Error)(nil); !errors.As(err, &le) || le.Message != "Durable writes are failing: writes do not finish in time." {
				t.Errorf("Ready behind a stuck probe: %v", err)
			}
		})
	}
	wg.Wait()
	if d := time.Since(start); d > readyTimeout+time.Second {
		t.Errorf("Ready behind a stuck probe took %s", d)
	}
	if n := st.pings.Load(); n != 1 {
		t.Errorf("%d probes outstanding, want 1", n)
	}
	close(release)
	for give := time.Now().Add(2 * time.Second); s.Ready(t.Context()) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(give) {
			t.Fatal("not ready after the stuck probe returned")
		}
	}
}

// TestReadyFromCallersWrites: a caller's write refused with the store
// unavailable answers for failHold without probing; one that succeeds
// answers at once; a conflict says nothing.
func TestReadyFromCallersWrites(t *testing.T) {
	st := &pingStore{ping: func(context.Context) error { return nil }}
	s := newReadyService(t, st)
	st.append = fmt.Errorf("append audit: %w: database or disk is full (13)", ladder.ErrUnavailable)
	if _, err := s.store.AppendAudit(t.Context()); err == nil {
		t.Fatal("append: want the store's error")
	}
	if err := s.Ready(t.Context()); err == nil || !strings.Contains(err.(*ladder.Error).Message, "the disk is full") {
		t.Errorf("Ready after a refused write: %v", err)
	}
	st.append = fmt.Errorf("%w: unique", ladder.ErrConflict)
	_, _ = s.store.AppendAudit(t.Context())
	if err := s.Ready(t.Context()); err == nil {
		t.Error("Ready after a conflict cleared a refused write")
	}
	if n := st.pings.Load(); n != 0 {
		t.Errorf("%d probes while a refused write answered", n)
	}
	st.append = nil
	_, _ = s.store.AppendAudit(t.Context())
	if err := s.Ready(t.Context()); err != nil {
		t.Errorf("Ready after a write succeeded: %v", err)
	}
	if n := st.pings.Load(); n != 0 {
		t.Errorf("%d probes while a write that succeeded answered", n)
	}
}

// TestWriteCauseSaysNoSecrets: /readyz is public, so the reason names the
// kind of failure in fixed words and never echoes the driver's error.
func TestWriteCauseSaysNoSecrets(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("commit: %w: database or disk is full (13)", ladder.ErrUnavailable), "the disk is full"},
		{errors.New("ERROR: could not extend file \"base/16384/2619\": No space left on device (SQLSTATE 53100)"), "the disk is full"},
		{errors.New("attempt to write a readonly database (8)"), "the database is read-only"},
		{errors.New("ERROR: cannot execute INSERT in a read-only transaction (SQLSTATE 25006)"), "the database is read-only"},
		{errors.New("ERROR: permission denied for table write_probe (SQLSTATE 42501)"), "the database refuses ladder's writes (permission denied)"},
		{fmt.Errorf("%w: store closed", ladder.ErrUnavailable), "the store is closed"},
		{errors.New("failed to connect to `user=ladder database=prod`: 10.1.2.3:5432 (db.internal): dial error: connection refused"), "the database cannot be reached"},
		{errors.Join(context.DeadlineExceeded, ladder.ErrUnavailable), "writes do not finish in time"},
		{errors.New("open /var/lib/ladder/secret-path/ladder.db: something odd"), "the store cannot write"},
	} {
		got := notReady(tt.err)
		if got.Message != "Durable writes are failing: "+tt.want+"." {
			t.Errorf("%v: %q, want %q", tt.err, got.Message, tt.want)
		}
		for _, leak := range []string{"10.1.2.3", "db.internal", "user=", "secret-path", "16384", "SQLSTATE"} {
			if strings.Contains(got.Message+got.Hint, leak) {
				t.Errorf("%v: the public reason %q leaks %q", tt.err, got.Message, leak)
			}
		}
	}
}

// BenchmarkObservedWrite is what reporting a write's outcome adds to every
// write: no allocation, no lock.
func BenchmarkObservedWrite(b *testing.B) {
	st := &pingStore{ping: func(context.Context) error { return nil }}
	s, err := New(Options{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	store, ctx := s.store, context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = store.AppendAudit(ctx)
		}
	})
}

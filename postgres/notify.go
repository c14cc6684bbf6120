package postgres

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/ladderhq/ladder"
)

// notifyChannel is the PostgreSQL channel writes NOTIFY on. Channels are
// database-wide, so each payload names its schema and a Store ignores
// other schemas' events.
const notifyChannel = "ladder_changes"

// EventKind says what an Event is about.
type EventKind string

// The event kinds.
const (
	// EventStep: a step's state changed its lane, pin, epoch or audit
	// rate (RecordReview whose decider moved one of them, SetLane,
	// ImportHistory). Workspace, Queue and Step name it.
	EventStep EventKind = "step"
	// EventKey: a key was created or revoked. KeyID names it.
	EventKey EventKind = "key"
	// EventOutbox: an event was written to the outbox (DESIGN.md §8a).
	// Workspace, EventType and, for an approval's event, ApprovalID name
	// it: dispatchers deliver it and agents waiting on the approval look
	// again.
	EventOutbox EventKind = "outbox"
	// EventApproval: an approval's status or outcome was stored (decided,
	// executed, expired). Workspace and ApprovalID name it: agents waiting
	// on it look again.
	EventApproval EventKind = "approval"
	// EventResync: events may have been missed (the listener connected or
	// reconnected, or the subscriber fell behind). Drop everything cached.
	EventResync EventKind = "resync"
)

// Event is a change committed to the database, by this replica or another.
type Event struct {
	Kind       EventKind `json:"kind"`
	Workspace  string    `json:"workspace,omitempty"`
	Queue      string    `json:"queue,omitempty"`
	Step       string    `json:"step,omitempty"`
	KeyID      string    `json:"key_id,omitempty"`
	EventType  string    `json:"event_type,omitempty"`
	ApprovalID string    `json:"approval_id,omitempty"`
	// Local is true when this Store made the change (its caller may have
	// invalidated its cache already).
	Local bool `json:"-"`
}

// payload is what travels in a NOTIFY.
type payload struct {
	Schema string `json:"schema"`
	Origin string `json:"origin"`
	Event
}

// Subscribe returns a channel of the changes committed to the database by
// any replica, so a cache of step states or keys can be invalidated within
// moments of another replica's write. Writes send NOTIFY ladder_changes in
// the transaction that makes the change, so an event arrives only for a
// committed change, after its commit.
//
// The first event on the channel is EventResync, sent once the Store is
// listening (every change committed after it is delivered); EventResync
// comes again whenever events may have been lost: the listening connection
// dropped and came back, or the subscriber fell more than 256 events
// behind. On EventResync, drop everything cached.
//
// The channel is closed when ctx ends or the Store closes. The listener
// holds one connection of its own, opened on the first Subscribe.
func (s *Store) Subscribe(ctx context.Context) <-chan Event {
	return s.lis.subscribe(ctx)
}

// notifyStep queues an EventStep for the batch's commit.
func (w *wtx) notifyStep(k ladder.StepKey) {
	w.queueNotify(Event{Kind: EventStep, Workspace: k.Workspace, Queue: k.Queue, Step: k.Step})
}

// notifyApproval queues an EventApproval for the batch's commit.
func (w *wtx) notifyApproval(workspace, id string) {
	w.queueNotify(Event{Kind: EventApproval, Workspace: workspace, ApprovalID: id})
}

// notifyKey queues an EventKey for the batch's commit.
func (w *wtx) notifyKey(id string) {
	w.queueNotify(Event{Kind: EventKey, KeyID: id})
}

func (w *wtx) queueNotify(ev Event) {
	b, err := json.Marshal(payload{Schema: w.s.schema, Origin: w.s.origin, Event: ev})
	if err != nil {
		return // strings only: cannot fail
	}
	w.notify = append(w.notify, string(b))
}

// dedupe drops repeated payloads, keeping the first of each.
func dedupe(ps []string) []string {
	seen := make(map[string]bool, len(ps))
	out := ps[:0:0]
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// subBuffer is how many events a subscriber may fall behind before its
// backlog is replaced by an EventResync.
const subBuffer = 256

// listener holds the LISTEN connection and fans its events out.
type listener struct {
	s   *Store
	cfg *pgx.ConnConfig

	mu        sync.Mutex
	subs      map[chan Event]struct{}
	listening bool
	started   bool
	closed    bool
	stop      chan struct{} // closed by close
	cancel    context.CancelFunc
	done      chan struct{} // closed when run returns
}

func newListener(s *Store, cfg *pgx.ConnConfig) *listener {
	return &listener{s: s, cfg: cfg.Copy(), subs: map[chan Event]struct{}{}, stop: make(chan struct{}), done: make(chan struct{})}
}

func (l *listener) subscribe(ctx context.Context) <-chan Event {
	ch := make(chan Event, subBuffer)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		close(ch)
		return ch
	}
	l.subs[ch] = struct{}{}
	if l.listening {
		ch <- Event{Kind: EventResync} // an empty buffer: never blocks
	}
	if !l.started {
		l.started = true
		var runCtx context.Context
		runCtx, l.cancel = context.WithCancel(context.Background())
		go l.run(runCtx)
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-l.stop:
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, ok := l.subs[ch]; ok {
			delete(l.subs, ch)
			close(ch)
		}
	}()
	return ch
}

// run listens until ctx ends, reconnecting with backoff when the
// connection fails.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	backoff := 100 * time.Millisecond
	for {
		conn, err := pgx.ConnectConfig(ctx, l.cfg)
		if err == nil {
			if _, err = conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
				conn.Close(context.Background())
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			l.s.log.Warn("listen for changes", "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		l.setListening(true)
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				if ctx.Err() == nil {
					l.s.log.Warn("listening connection lost; reconnecting", "err", err)
				}
				break
			}
			var p payload
			if json.Unmarshal([]byte(n.Payload), &p) != nil || p.Schema != l.s.schema || p.Kind == "" {
				continue
			}
			p.Event.Local = p.Origin == l.s.origin
			l.broadcast(p.Event)
		}
		l.setListening(false)
		conn.Close(context.Background())
		if ctx.Err() != nil {
			return
		}
	}
}

func (l *listener) setListening(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.listening = on
	if on {
		for ch := range l.subs {
			deliver(ch, Event{Kind: EventResync})
		}
	}
}

func (l *listener) broadcast(ev Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.subs {
		deliver(ch, ev)
	}
}

// deliver sends ev without blocking. A subscriber whose buffer is full
// has its oldest event replaced by an EventResync, which covers both.
func deliver(ch chan Event, ev Event) {
	select {
	case ch <- ev:
		return
	default:
	}
	select {
	case <-ch:
	default:
	}
	select {
	case ch <- Event{Kind: EventResync}:
	default:
	}
}

// close stops the listener and closes every subscriber's channel.
func (l *listener) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	close(l.stop)
	for ch := range l.subs {
		close(ch)
	}
	l.subs = map[chan Event]struct{}{}
	started, cancel := l.started, l.cancel
	l.mu.Unlock()
	if started {
		cancel()
		<-l.done
	}
}

package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ladderhq/ladder"
)

// Sender carries one event to one endpoint. It returns the HTTP status the
// endpoint answered (0 when none came) and an error unless the endpoint
// took the event.
type Sender interface {
	Send(ctx context.Context, ev ladder.Event) (status int, err error)
}

// Endpoint is one place a workspace's events go.
type Endpoint struct {
	// Name is workspace/name, unique on the server; deliveries are kept
	// under it.
	Name      string
	Workspace string
	// Events are the event types it wants; empty means every type.
	Events []string
	// MaxInFlight caps the deliveries to it in progress on one replica.
	MaxInFlight int
	// MaxAttempts is how many tries a delivery gets before it is dead.
	MaxAttempts int
	// Backoff is the wait after the first failed try; it doubles after
	// each one (with jitter), up to MaxBackoff.
	Backoff time.Duration
	// Timeout bounds one try.
	Timeout time.Duration
	Sender  Sender
}

// Wants reports whether the endpoint takes ev.
func (e *Endpoint) Wants(ev ladder.Event) bool {
	return ev.Workspace == e.Workspace && (len(e.Events) == 0 || slices.Contains(e.Events, ev.Type))
}

// MaxBackoff caps the wait between two tries.
const MaxBackoff = time.Hour

// retryIn is the wait after the attempt-th failed try: Backoff doubled
// per earlier failure, capped, with full jitter over its upper half so
// replicas and endpoints that failed together do not retry together.
func (e *Endpoint) retryIn(attempt int) time.Duration {
	d := e.Backoff
	for i := 1; i < attempt && d < MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

// Options configure a Dispatcher.
type Options struct {
	Store     ladder.EventStore
	Endpoints []Endpoint
	Logger    *slog.Logger
	// Poll is how often the outbox is read when nothing wakes the
	// dispatcher (default 1s).
	Poll time.Duration
	// Observe, when set, counts each try: delivered, failed or dead; and
	// each pending delivery retired at start because its endpoint is no
	// longer configured: retired.
	Observe func(endpoint, outcome string)
	// Retention is how long delivered deliveries (and events left with no
	// delivery) are kept; older ones are deleted in batches of PruneBatch,
	// once every PruneEvery. Zero keeps them all.
	Retention  time.Duration
	PruneEvery time.Duration // default 1 minute
	PruneBatch int           // default 500
	// Now is the clock the retention is measured by (default time.Now).
	Now func() time.Time
}

// Dispatcher delivers the outbox's events after commit. Run one per
// replica: the store leases each delivery to one dispatcher at a time.
type Dispatcher struct {
	o    Options
	eps  map[string]*Endpoint
	wake chan struct{}

	mu       sync.Mutex
	inflight map[string]int
	wg       sync.WaitGroup
}

// New returns a dispatcher over o.Endpoints.
func New(o Options) *Dispatcher {
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.PruneEvery <= 0 {
		o.PruneEvery = time.Minute
	}
	if o.PruneBatch <= 0 {
		o.PruneBatch = 500
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	d := &Dispatcher{o: o, eps: map[string]*Endpoint{}, wake: make(chan struct{}, 1), inflight: map[string]int{}}
	for i := range o.Endpoints {
		e := &o.Endpoints[i]
		e.MaxInFlight, e.MaxAttempts = max(e.MaxInFlight, 1), max(e.MaxAttempts, 1)
		if e.Backoff <= 0 {
			e.Backoff = time.Second
		}
		if e.Timeout <= 0 {
			e.Timeout = 10 * time.Second
		}
		d.eps[e.Name] = e
	}
	return d
}

// Kick makes the dispatcher read the outbox now (a change committed).
func (d *Dispatcher) Kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then waits for the tries in progress. It
// first retires the pending deliveries of endpoints no longer configured,
// and prunes old delivered ones as it goes.
func (d *Dispatcher) Run(ctx context.Context) {
	defer d.wg.Wait()
	d.retire(ctx)
	t := time.NewTimer(0)
	defer t.Stop()
	var pruned time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.wake:
		}
		d.pass(ctx)
		if now := d.o.Now(); d.o.Retention > 0 && now.Sub(pruned) >= d.o.PruneEvery {
			pruned = now
			d.prune(ctx, now.Add(-d.o.Retention))
		}
		t.Reset(d.o.Poll)
	}
}

// retire makes the pending deliveries of endpoints this replica does not
// know dead, so they neither wait forever nor hold up the oldest
// undelivered age. Every replica should run the same config: one with an
// older config would retire a newer endpoint's deliveries.
func (d *Dispatcher) retire(ctx context.Context) {
	names := make([]string, 0, len(d.eps))
	for name := range d.eps {
		names = append(names, name)
	}
	slices.Sort(names)
	got, err := d.o.Store.RetireDeliveries(ctx, names, ladder.EndpointRemoved)
	if err != nil {
		if ctx.Err() == nil {
			d.o.Logger.Warn("retire deliveries of removed endpoints", "err", err)
		}
		return
	}
	for ep, n := range got {
		d.o.Logger.Warn("deliveries of an endpoint removed from the config are dead", "endpoint", ep, "deliveries", n)
		if d.o.Observe != nil {
			for range n {
				d.o.Observe(ep, "retired")
			}
		}
	}
}

// prune deletes delivered deliveries older than before, a batch at a
// time so no transaction holds the tables long, up to 20 batches a pass.
func (d *Dispatcher) prune(ctx context.Context, before time.Time) {
	for range 20 {
		n, err := d.o.Store.PruneDeliveries(ctx, before, d.o.PruneBatch)
		if err != nil {
			if ctx.Err() == nil {
				d.o.Logger.Warn("prune deliveries", "err", err)
			}
			return
		}
		if n < d.o.PruneBatch {
			return
		}
	}
}

// targets names the endpoints that want ev.
func (d *Dispatcher) targets(ev ladder.Event) []string {
	var out []string
	for _, e := range d.o.Endpoints {
		if e.Wants(ev) {
			out = append(out, e.Name)
		}
	}
	return out
}

// pass fans out new events and starts the deliveries that are due, as
// many as each endpoint's free slots allow.
func (d *Dispatcher) pass(ctx context.Context) {
	const batch = 100
	for {
		n, err := d.o.Store.FanOut(ctx, batch, d.targets)
		if err != nil {
			if ctx.Err() == nil {
				d.o.Logger.Warn("fan out events", "err", err)
			}
			return
		}
		if n < batch {
			break
		}
	}
	slots := map[string]int{}
	var lease time.Duration
	d.mu.Lock()
	for name, e := range d.eps {
		if free := e.MaxInFlight - d.inflight[name]; free > 0 {
			slots[name] = free
		}
		lease = max(lease, e.Timeout)
	}
	d.mu.Unlock()
	if len(slots) == 0 {
		return
	}
	// The lease outlasts a try (twice its timeout), so a delivery is not
	// claimed again while it is in progress; if this replica dies, another
	// takes it once the lease ends.
	got, err := d.o.Store.ClaimDeliveries(ctx, batch, 2*lease, slots)
	if err != nil {
		if ctx.Err() == nil {
			d.o.Logger.Warn("claim deliveries", "err", err)
		}
		return
	}
	for _, dl := range got {
		e := d.eps[dl.Endpoint]
		if e == nil || dl.Event == nil {
			continue // an endpoint no longer configured: its deliveries wait
		}
		d.mu.Lock()
		d.inflight[e.Name]++
		d.mu.Unlock()
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.deliver(ctx, e, dl)
			d.mu.Lock()
			d.inflight[e.Name]--
			d.mu.Unlock()
			d.Kick()
		}()
	}
}

// deliver makes one try and records it.
func (d *Dispatcher) deliver(ctx context.Context, e *Endpoint, dl ladder.Delivery) {
	tctx, cancel := context.WithTimeout(ctx, e.Timeout)
	status, err := e.Sender.Send(tctx, *dl.Event)
	cancel()
	if err != nil && ctx.Err() != nil {
		return // shutting down: the lease runs out and a replica tries again
	}
	r := ladder.DeliveryResult{ID: dl.ID, StatusCode: status}
	outcome := "delivered"
	switch {
	case err == nil:
		r.Delivered = true
	case dl.Attempts+1 >= e.MaxAttempts:
		r.Dead, r.Error, outcome = true, err.Error(), "dead"
	default:
		r.Error, r.RetryIn, outcome = err.Error(), e.retryIn(dl.Attempts+1), "failed"
	}
	// The try happened: record it even as the server stops.
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer fcancel()
	if ferr := d.o.Store.FinishDelivery(fctx, r); ferr != nil {
		d.o.Logger.Warn("record delivery", "delivery_id", dl.ID, "err", ferr)
		return
	}
	if d.o.Observe != nil {
		d.o.Observe(e.Name, outcome)
	}
	if outcome == "failed" && r.RetryIn < d.o.Poll {
		// A retry due before the next poll is looked for when it is due.
		time.AfterFunc(r.RetryIn, d.Kick)
	}
	lvl := slog.LevelInfo
	if outcome == "dead" {
		lvl = slog.LevelWarn
	}
	d.o.Logger.Log(ctx, lvl, "event delivery", "endpoint", e.Name, "event_id", dl.EventID, "event_type", dl.EventType,
		"delivery_id", dl.ID, "attempt", dl.Attempts+1, "outcome", outcome, "status", status, "err", r.Error)
}

// Hook posts events as Standard Webhooks messages: the event as JSON,
// signed with every key (the new one first while a secret rotates).
type Hook struct {
	URL    string
	Keys   [][]byte
	Client *http.Client
	// PublicURL makes the events' console links absolute.
	PublicURL string
	Now       func() time.Time
}

// Body is the JSON an endpoint receives for ev: the event with its link
// made absolute with publicURL.
func Body(ev ladder.Event, publicURL string) ([]byte, error) {
	if ev.Data.Link != "" {
		ev.Data.Link = publicURL + ev.Data.Link
	}
	return json.Marshal(ev)
}

// Send posts ev once.
func (h *Hook) Send(ctx context.Context, ev ladder.Event) (int, error) {
	body, err := Body(ev, h.PublicURL)
	if err != nil {
		return 0, err
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	ts := now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ladder-webhooks")
	req.Header.Set("webhook-id", ev.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("webhook-signature", Sign(h.Keys, ev.ID, ts, body))
	resp, err := h.Client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("post: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("the endpoint answered HTTP %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

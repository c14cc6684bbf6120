// Package testenv starts a real ladder HTTP handler on a SQLite store with a
// controllable clock, for tests of the REST and MCP surfaces.
package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/console"
	"github.com/ladderhq/ladder/demo"
	lhttp "github.com/ladderhq/ladder/http"
	"github.com/ladderhq/ladder/mcp"
	"github.com/ladderhq/ladder/oauth"
	"github.com/ladderhq/ladder/service"
	"github.com/ladderhq/ladder/sqlite"
	"github.com/ladderhq/ladder/translog"
	"github.com/ladderhq/ladder/upstream"
)

// Clock is a settable clock: stopped at a time the test advances, or (from
// WallClock) the wall clock shifted.
type Clock struct {
	mu   sync.Mutex
	t    time.Time
	wall bool          // Now is time.Now() + skew
	skew time.Duration // what Advance adds to a wall clock
}

// WallClock returns a clock that runs with the wall clock, skew ahead of it
// (behind, when negative): a replica whose clock is off.
func WallClock(skew time.Duration) *Clock { return &Clock{wall: true, skew: skew} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wall {
		return time.Now().Add(c.skew)
	}
	return c.t
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	if c.wall {
		c.skew += d
	} else {
		c.t = c.t.Add(d)
	}
	c.mu.Unlock()
}

// Env is a running test server.
type Env struct {
	T      testing.TB
	Server *httptest.Server
	Svc    *service.Service
	Store  ladder.Store
	Clock  *Clock
	Config *config.Config
	// Upstream is the demo upstream the demo config's capabilities call.
	Upstream *demo.Upstream
	// Keys maps "workspace/kind" to a token.
	Keys map[string]string
	// Registry holds the server's metrics (also served on /metrics).
	Registry *prometheus.Registry
	// CheckpointKey is the public half of the key the server signs its
	// checkpoints with ("" with Options.Unsigned).
	CheckpointKey string
}

// Options tune Start.
type Options struct {
	// Seed loads the demo's 14 weeks of history at the clock's time.
	Seed bool
	// Work, with Seed, also leaves the work `ladder demo` leaves waiting
	// (demo.SeedWork): approvals, shadow proposals, sampled audits, gate
	// decisions. Tests that count approvals or audit records leave it off.
	Work          bool
	ToolNames     string
	OpenWorkspace string
	// WrapStore, when set, wraps the SQLite store the service uses (a test
	// double that fails some writes, say). Env.Store stays the unwrapped
	// store.
	WrapStore func(ladder.Store) ladder.Store
	// RatePerSecond and RateBurst set the per-key rate limit (0: none).
	RatePerSecond float64
	RateBurst     int
	// MaxPendingPerKey caps pending approvals per key (0: the default).
	MaxPendingPerKey int
	// MaxShadowPerStep caps unreviewed shadow proposals per key and step
	// (0: the default).
	MaxShadowPerStep int
	// MaxInFlight caps concurrent requests (0: the default).
	MaxInFlight int
	// MaxInFlightPerKey, MaxInFlightPerAddress and BodyTimeout set the
	// server's admission caps (0: the defaults; see http.Options).
	MaxInFlightPerKey     int
	MaxInFlightPerAddress int
	BodyTimeout           time.Duration
	// DBPath is the SQLite file (default: a new file in t.TempDir()).
	DBPath string
	// OpenStore, when set, opens the store instead of a SQLite file, on
	// the server's clock (a PostgreSQL store in a test schema, say: two
	// Envs on one schema are two replicas). StartWith closes it.
	OpenStore func(now func() time.Time) (ladder.Store, error)
	// Clock is the server's clock (default: stopped at 2026-09-01 09:00
	// UTC until the test advances it).
	Clock *Clock
	// ApprovalTTL is how long an approval waits for a person (0: 72h).
	ApprovalTTL time.Duration
	// Runner, when set, executes capability calls instead of the pool over
	// the demo upstream.
	Runner service.Runner
	// CallMargin is how long past its executor's timeout a call may stay
	// running before Svc.RecoverCalls marks it unknown (0: the default).
	CallMargin time.Duration
	// Listener, when set, is where the server listens: a test that must
	// put the server's URL in its config (identity.resource) binds first.
	Listener net.Listener
	// OAuth tunes the token verifier built when the config has an
	// identity section (Identity is taken from the config).
	OAuth oauth.Options
	// Unsigned runs without a checkpoint key (serve --unsigned-audit); by
	// default each Env signs its logs' checkpoints with a key of its own,
	// whose public half is Env.CheckpointKey.
	Unsigned bool
	// CheckpointKey, when set, is the private checkpoint key to sign with
	// (replicas of one database share one).
	CheckpointKey string
	// Logger, when set, is the HTTP server's log (its access log among
	// it); by default the server logs nothing.
	Logger *slog.Logger
}

// Start starts a server on the given YAML config (the demo config when
// yaml is empty) with an agent, a human and an admin key per workspace.
func Start(t testing.TB, yaml string) *Env {
	t.Helper()
	return StartWith(t, yaml, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, yaml string, opts Options) *Env {
	t.Helper()
	data := []byte(yaml)
	if yaml == "" {
		data = config.Demo()
	}
	cfg, err := config.Parse("test.yaml", data)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	clock := opts.Clock
	if clock == nil {
		clock = &Clock{t: time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)}
	}
	open := opts.OpenStore
	seeded := false
	if open == nil {
		dbPath := opts.DBPath
		if dbPath == "" {
			dbPath = filepath.Join(t.TempDir(), "ladder.db")
		}
		if opts.Seed {
			// The demo's history is seeded once per test binary, config
			// and clock, into a template database each test copies.
			tpl, err := seededTemplate(t, data, clock.Now())
			if err != nil {
				t.Fatalf("seed the demo: %v", err)
			}
			if err := os.WriteFile(dbPath, tpl, 0o600); err != nil {
				t.Fatal(err)
			}
			seeded = true
		}
		open = func(now func() time.Time) (ladder.Store, error) {
			return sqlite.Open(context.Background(), dbPath, sqlite.Options{Now: now})
		}
	}
	st, err := open(clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	parts := cfg.Parts()
	wss, th, gates := parts.Workspaces, parts.Rules, parts.Gates
	var svcStore ladder.Store = st
	if opts.WrapStore != nil {
		svcStore = opts.WrapStore(st)
	}
	pool, up := DemoPool(t)
	var runner service.Runner = pool
	if opts.Runner != nil {
		runner = opts.Runner
	}
	var tokens ladder.TokenVerifier
	var verifier *oauth.Verifier
	var challenge func(string, *ladder.Error) string
	if cfg.Identity != nil {
		o := opts.OAuth
		o.Identity = *cfg.Identity
		verifier = oauth.New(o)
		tokens, challenge = verifier, verifier.Challenge
	}
	var signer *translog.Signer
	if !opts.Unsigned {
		skey := opts.CheckpointKey
		if skey == "" {
			var err error
			if skey, _, err = translog.GenerateKey("ladder.test"); err != nil {
				t.Fatal(err)
			}
		}
		if signer, err = translog.NewSigner(skey); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := service.New(service.Options{Store: svcStore, Checkpoints: signer, Workspaces: wss, Rules: th, AuditSecret: []byte("test-secret"), Now: clock.Now, Gates: gates, Runner: runner,
		RatePerSecond: opts.RatePerSecond, RateBurst: opts.RateBurst, MaxPendingPerKey: opts.MaxPendingPerKey, ApprovalTTL: opts.ApprovalTTL,
		MaxShadowPerStep: opts.MaxShadowPerStep, CallMargin: opts.CallMargin, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() }) // before the store closes
	if opts.Seed && !seeded {
		// The demo stores its steps' states as its history starts them.
		if err := demo.Seed(context.Background(), svc, clock.Now(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.EnsureSteps(context.Background(), svc.InitialStates()); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := mcp.New(mcp.Options{Service: svc, ToolNames: opts.ToolNames, OpenWorkspace: opts.OpenWorkspace, Registry: reg, Challenge: challenge, AllowedOrigins: cfg.Server.AllowedOrigins})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Seed && opts.Work {
		if _, err := demo.SeedWork(context.Background(), svc); err != nil {
			t.Fatal(err)
		}
	}
	mounts := map[string]http.Handler{"/mcp": m, "/console/": console.New(console.Options{Service: svc, Secret: []byte("test-console-secret"), SSO: verifier})}
	if verifier != nil {
		mounts[oauth.MetadataPath] = verifier.MetadataHandler()
		mounts[oauth.MetadataPath+"/mcp"] = verifier.MetadataHandler()
	}
	srv := httptest.NewUnstartedServer(lhttp.New(lhttp.Options{Service: svc, Mounts: mounts, Registry: reg, MaxInFlight: opts.MaxInFlight, Challenge: challenge, AllowedOrigins: cfg.Server.AllowedOrigins,
		MaxInFlightPerKey: opts.MaxInFlightPerKey, MaxInFlightPerAddress: opts.MaxInFlightPerAddress, BodyTimeout: opts.BodyTimeout, Logger: opts.Logger}))
	if opts.Listener != nil {
		srv.Listener.Close()
		srv.Listener = opts.Listener
	}
	srv.Start()
	t.Cleanup(srv.Close)
	e := &Env{T: t, Server: srv, Svc: svc, Store: st, Clock: clock, Config: cfg, Keys: map[string]string{}, Upstream: up, Registry: reg, CheckpointKey: svc.CheckpointKey()}
	for _, ws := range svc.WorkspaceIDs() {
		for _, kind := range []ladder.KeyKind{ladder.KeyAgent, ladder.KeyHuman, ladder.KeyAdmin} {
			_, tok, err := svc.CreateKey(context.Background(), "test", ladder.KeyRequest{Workspace: ws, Kind: kind})
			if err != nil {
				t.Fatal(err)
			}
			e.Keys[ws+"/"+string(kind)] = tok
		}
	}
	return e
}

// templates holds the seeded demo databases of this test binary, by config
// and clock reading: the history takes seconds to import, and 25 tests
// start on it.
var templates sync.Map // templateKey → *template

type templateKey struct {
	config string
	now    time.Time
}

type template struct {
	once sync.Once
	data []byte
	err  error
}

// seededTemplate returns the bytes of a SQLite database holding the demo's
// history seeded at now under the config, made on first use.
func seededTemplate(t testing.TB, config []byte, now time.Time) ([]byte, error) {
	v, _ := templates.LoadOrStore(templateKey{string(config), now}, &template{})
	tpl := v.(*template)
	tpl.once.Do(func() { tpl.data, tpl.err = seedTemplate(config, now) })
	return tpl.data, tpl.err
}

// seedTemplate seeds the demo into a fresh database and returns its file.
func seedTemplate(data []byte, now time.Time) ([]byte, error) {
	dir, err := os.MkdirTemp("", "ladder-testenv-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "ladder.db")
	cfg, err := config.Parse("test.yaml", data)
	if err != nil {
		return nil, err
	}
	clock := func() time.Time { return now }
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{Now: clock})
	if err != nil {
		return nil, err
	}
	parts := cfg.Parts()
	svc, err := service.New(service.Options{Store: st, Workspaces: parts.Workspaces, Rules: parts.Rules, AuditSecret: []byte("test-secret"), Now: clock, Gates: parts.Gates})
	if err != nil {
		st.Close()
		return nil, err
	}
	err = demo.Seed(context.Background(), svc, now, nil)
	svc.Close()
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	// Closing the last connection checkpoints the WAL into the file.
	return os.ReadFile(path)
}

// DemoPool starts the demo's stand-in upstream and returns an executor pool
// whose demo: URLs reach it; both stop when the test ends.
func DemoPool(tb testing.TB) (*upstream.Pool, *demo.Upstream) {
	tb.Helper()
	up, err := demo.StartUpstream()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { up.Close() })
	pool := upstream.NewPool(func(string) string { return "" }, nil)
	pool.Rewrite = up.Resolve
	tb.Cleanup(func() { pool.Close() })
	return pool, up
}

// Response is a decoded HTTP response.
type Response struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    []byte
}

// Header is an extra request header for DoWith.
type Header struct{ Name, Value string }

// Do sends a request with the key (no header when key is "") and a JSON
// body (none when body is nil; a string or []byte is sent as it is).
func (e *Env) Do(method, path, key string, body any) Response {
	e.T.Helper()
	return e.DoWith(method, path, key, body)
}

// DoWith is Do with extra headers.
func (e *Env) DoWith(method, path, key string, body any, headers ...Header) Response {
	e.T.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.T.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.Server.URL+path, rd)
	if err != nil {
		e.T.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	for _, h := range headers {
		req.Header.Set(h.Name, h.Value)
	}
	resp, err := e.Server.Client().Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := Response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

// ErrorCode returns the refusal name of an error response.
func (r Response) ErrorCode() string {
	e, _ := r.Body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// ErrorHint returns the hint of an error response.
func (r Response) ErrorHint() string {
	e, _ := r.Body["error"].(map[string]any)
	c, _ := e["hint"].(string)
	return c
}

// MetricValue reads one series (its name and labels, as /metrics writes
// them) from a Prometheus text exposition, and whether it is there.
func MetricValue(t testing.TB, exposition []byte, series string) (float64, bool) {
	t.Helper()
	for line := range strings.Lines(string(exposition)) {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", strings.TrimSpace(line), err)
			}
			return v, true
		}
	}
	return 0, false
}

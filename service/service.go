// Package service is ladder's application layer: it carries out what the
// surfaces (REST, MCP, CLI, console) ask for — authenticate keys, route
// items, record reviews, move lanes, build evidence packs — over a
// ladder.Store, and returns *ladder.Error refusals that every surface renders
// the same way. It holds no state another replica needs.
//
// The contract it serves is the root package's: the requests it takes and
// the answers and views it returns are ladder types (ladder.RouteRequest,
// ladder.EvidencePack, …), and Service.As binds it to one caller as a
// Caller that implements the root service interfaces, the same ones
// client.Client implements over REST. Its methods take the caller's
// ladder.Principal because the surfaces authenticate before they call.
package service

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/gate"
	"github.com/ladderhq/ladder/internal/tracing"
	"github.com/ladderhq/ladder/translog"
)

// Options configure a Service.
type Options struct {
	Store      ladder.Store
	Workspaces []ladder.Workspace
	// Rules are per-step lane rules (class defaults with config overrides);
	// a step without an entry gets its class defaults.
	Rules map[ladder.StepKey]ladder.Thresholds
	// Runner executes capability calls (upstream.Pool).
	Runner Runner
	// ApprovalTTL is how long a pending approval waits (default 72h).
	ApprovalTTL time.Duration
	// AuditSecret keys the blind audit sampling hash; agents never see it.
	AuditSecret []byte
	// Checkpoints signs the workspaces' transparency log checkpoints; nil
	// runs unsigned (serve --unsigned-audit).
	Checkpoints *translog.Signer
	Now         func() time.Time
	Logger      *slog.Logger

	// Gates are the compiled evidence gate cases of each workspace, by
	// workspace id; a workspace without an entry has no gate cases.
	Gates map[string]*gate.Gate

	// RatePerSecond and RateBurst are the per-key token bucket Admit
	// applies (server.rate_limit); zero turns the limit off.
	RatePerSecond float64
	RateBurst     int
	// MaxPendingPerKey caps the approvals one key may have pending; 0 means
	// DefaultMaxPendingPerKey and a negative value turns the cap off.
	MaxPendingPerKey int
	// MaxShadowPerStep caps the unreviewed shadow proposals one key may have
	// stored per step (server.max_shadow_proposals); 0 means
	// DefaultMaxShadowPerStep and a negative value turns the cap off.
	MaxShadowPerStep int
	// CallMargin is how long past its executor's timeout a call may stay
	// running before RecoverCalls marks its outcome unknown (0:
	// DefaultCallMargin).
	CallMargin time.Duration
	// Tokens verifies bearer tokens that are not ladder keys (OAuth access
	// tokens, package oauth); nil accepts keys only.
	Tokens ladder.TokenVerifier
	// TracerProvider makes the spans of the route decision, the gate and
	// the audit write (package telemetry); nil makes none.
	TracerProvider trace.TracerProvider
}

// Service is the application. It is safe for concurrent use.
type Service struct {
	// tracer is nil when tracing is off.
	tracer trace.Tracer
	// waiters are the agents waiting on approvals (WaitApproval).
	waiters waiters
	// onLaneChange, when set, hears of each lane change this replica
	// committed (ObserveLaneChanges); oldestPending is the creation time
	// (Unix ns, 0: none) of the oldest approval pending at the last
	// ExpireDue.
	onLaneChange  func(ladder.LaneChange)
	oldestPending atomic.Int64
	store         ladder.Store
	workspaces    map[string]*ladder.Workspace
	order         []string
	rules         map[ladder.StepKey]ladder.Thresholds
	auditSecret   []byte
	checkpoints   *translog.Signer
	adoption      adoption
	gates         map[string]*gate.Gate
	now           func() time.Time
	log           *slog.Logger
	runner        Runner
	approvalTTL   time.Duration
	schemas       schemaCache
	macs          sync.Pool // *sampler: HMAC-SHA256 keyed with auditSecret, reused per sample
	limits        limiters
	maxPending    int
	maxShadow     int
	// shadowDropped counts shadow proposals not stored at the cap.
	shadowDropped atomic.Uint64
	// writes remembers how durable writes have been going, for Ready.
	writes *writePath
	// calls are the calls this process runs and the results it holds
	// until the store takes them; callMargin is RecoverCalls' margin.
	calls      *callBook
	callMargin time.Duration
	tokens     ladder.TokenVerifier
	// steps is the view of step states routes are decided from (a hint
	// RecordRoute re-checks).
	steps *stepView
	// keys is the view of verified keys the hot MCP calls are
	// authenticated from (a hint every commit re-checks).
	keys *keyView
}

// AllWorkspaces is the workspace of an operator's admin key that may manage
// every workspace (the key printed by the first serve).
const AllWorkspaces = "*"

// New returns a Service.
func New(opts Options) (*Service, error) {
	if opts.Store == nil {
		return nil, errors.New("service: a store is required")
	}
	s := &Service{tracer: tracing.Tracer(opts.TracerProvider), store: opts.Store, workspaces: map[string]*ladder.Workspace{}, now: opts.Now, log: opts.Logger, rules: opts.Rules, auditSecret: opts.AuditSecret}
	s.gates = opts.Gates
	s.steps = newStepView()
	s.keys = newKeyView()
	s.tokens = opts.Tokens
	s.checkpoints = opts.Checkpoints
	s.runner, s.approvalTTL = opts.Runner, opts.ApprovalTTL
	if s.approvalTTL <= 0 {
		s.approvalTTL = 72 * time.Hour
	}
	s.limits.perSecond, s.limits.burst = opts.RatePerSecond, opts.RateBurst
	if s.limits.burst < 1 {
		s.limits.burst = max(1, int(opts.RatePerSecond))
	}
	s.maxPending = opts.MaxPendingPerKey
	if s.maxPending == 0 {
		s.maxPending = DefaultMaxPendingPerKey
	}
	s.maxShadow = opts.MaxShadowPerStep
	if s.maxShadow == 0 {
		s.maxShadow = DefaultMaxShadowPerStep
	}
	s.macs.New = func() any { return &sampler{mac: hmac.New(sha256.New, s.auditSecret)} }
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.writes = newWritePath(s.log)
	s.writes.recovered = s.reportOutage
	s.calls, s.callMargin = newCallBook(), opts.CallMargin
	if s.callMargin <= 0 {
		s.callMargin = DefaultCallMargin
	}
	s.store = &observedStore{Store: s.store, w: s.writes}
	for i := range opts.Workspaces {
		w := &opts.Workspaces[i]
		s.workspaces[w.ID] = w
		s.order = append(s.order, w.ID)
	}
	return s, nil
}

// Now returns the service clock's time.
func (s *Service) Now() time.Time { return s.now() }

// Workspace returns a declared workspace.
func (s *Service) Workspace(id string) (*ladder.Workspace, bool) {
	w, ok := s.workspaces[id]
	return w, ok
}

// WorkspaceIDs returns the declared workspace ids in config order.
func (s *Service) WorkspaceIDs() []string { return append([]string(nil), s.order...) }

// storeErr turns a store failure into a refusal: an unavailable store means
// nothing was recorded, so the caller gets AUDIT_UNAVAILABLE.
func storeErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ladder.ErrKeyInactive):
		// Revoked or expired since the request was authenticated: refused
		// at the commit (ladder.RequireActiveKey), as an invalid key.
		e := errKeyInvalid()
		e.Err = fmt.Errorf("%s: %w", op, err)
		return e
	case errors.Is(err, ladder.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return &ladder.Error{Code: ladder.CodeAuditUnavailable, Message: "The audit log cannot be written right now, so nothing was done.", Hint: "retry shortly; the operator is alerted through /readyz and metrics", Err: fmt.Errorf("%s: %w", op, err)}
	}
	var le *ladder.Error
	if errors.As(err, &le) {
		return le
	}
	return &ladder.Error{Code: ladder.CodeAuditUnavailable, Message: "The store failed, so nothing was done.", Hint: "retry shortly; if it persists, tell the operator", Err: fmt.Errorf("%s: %w", op, err)}
}

// sortedKeys returns m's keys sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

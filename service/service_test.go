package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/sqlite"
)

const demoWS = "vantrow-bills"

var (
	demoAgent = ladder.Principal{KeyID: "agent1", Workspace: demoWS, Kind: ladder.KeyAgent}
	demoHuman = ladder.Principal{KeyID: "human1", Workspace: demoWS, Kind: ladder.KeyHuman}
)

// newDemoService is a Service over the demo config and a fresh SQLite
// store, with every step in its starting lane and a fixed clock.
func newDemoService(t testing.TB, edit ...func(*Options)) *Service {
	t.Helper()
	now := time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)
	return newDemoServiceClock(t, func() time.Time { return now }, edit...)
}

// newDemoServiceClock is newDemoService whose service and store read clock.
func newDemoServiceClock(t testing.TB, clock func() time.Time, edit ...func(*Options)) *Service {
	t.Helper()
	ctx := context.Background()
	cfg, err := config.Parse("demo.yaml", config.Demo())
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ladder.db"), sqlite.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	parts := cfg.Parts()
	opts := Options{Store: st, Workspaces: parts.Workspaces, Rules: parts.Rules, Gates: parts.Gates, AuditSecret: []byte("service-test"), Now: clock}
	for _, e := range edit {
		e(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureSteps(ctx, s.InitialStates()); err != nil {
		t.Fatal(err)
	}
	return s
}

// refusal is what a user sees of a refusal: its code and the field it names.
type refusal struct {
	Code  ladder.Code
	Field string
}

// refusalOf returns err's code and field; the zero refusal for no error.
func refusalOf(t *testing.T, err error) refusal {
	t.Helper()
	if err == nil {
		return refusal{}
	}
	var le *ladder.Error
	if !errors.As(err, &le) {
		t.Fatalf("not a *ladder.Error: %v", err)
	}
	f, _ := le.Data["field"].(string)
	return refusal{Code: le.Code, Field: f}
}

func invalid(field string) refusal { return refusal{Code: ladder.CodeInvalidArgument, Field: field} }

func mustCap(t *testing.T, s *Service, ws, id string) ladder.Capability {
	t.Helper()
	c, ok := s.FindCapability(ws, id)
	if !ok {
		t.Fatalf("no capability %s in %s", id, ws)
	}
	return c
}

func TestSplitArgs(t *testing.T) {
	s := newDemoService(t)
	scoped := mustCap(t, s, "partner-programs", "ticket6:readLedger")
	plain := mustCap(t, s, demoWS, "tms:postBill")
	gated := plain
	gated.Gate = &ladder.CapabilityGate{Case: "release_payment", Fn: "score_release_hold"}
	type want struct {
		Err      refusal
		Payload  map[string]any
		Scope    map[string]string
		Key      string
		Evidence string
	}
	for _, tt := range []struct {
		name string
		c    ladder.Capability
		raw  string
		want want
	}{
		{"empty body is an empty call", plain, ``, want{Payload: map[string]any{}, Scope: map[string]string{}}},
		{"null is an empty call", plain, `null`, want{Payload: map[string]any{}, Scope: map[string]string{}}},
		{"not an object", plain, `[1]`, want{Err: invalid("arguments")}},
		{"duplicate key", plain, `{"a":1,"a":2}`, want{Err: invalid("arguments")}},
		{"payload not an object", plain, `{"payload":[1]}`, want{Err: invalid("payload")}},
		{"payload null", plain, `{"payload":null}`, want{Err: invalid("payload")}},
		{"extra keys merge into the payload", plain, `{"payload":{"bill_id":"B1"},"amount_usd":12.5}`,
			want{Payload: map[string]any{"bill_id": "B1", "amount_usd": json.Number("12.5")}, Scope: map[string]string{}}},
		{"idempotency key", plain, `{"bill_id":"B1","idempotency_key":"k1"}`,
			want{Payload: map[string]any{"bill_id": "B1"}, Scope: map[string]string{}, Key: "k1"}},
		{"idempotency key not a string", plain, `{"idempotency_key":7}`, want{Err: invalid("idempotency_key")}},
		{"idempotency key too long", plain, `{"idempotency_key":"` + strings.Repeat("k", 201) + `"}`, want{Err: invalid("idempotency_key")}},
		{"reserved name in another case", plain, `{"Idempotency_Key":"k1"}`, want{Err: invalid("Idempotency_Key")}},
		{"payload in another case", plain, `{"PAYLOAD":{}}`, want{Err: invalid("PAYLOAD")}},
		{"field both inside and beside payload", plain, `{"payload":{"bill_id":"B1"},"Bill_id":"B2"}`, want{Err: invalid("Bill_id")}},
		{"evidence of an ungated capability is payload", plain, `{"evidence":{"x":1}}`,
			want{Payload: map[string]any{"evidence": map[string]any{"x": json.Number("1")}}, Scope: map[string]string{}}},
		{"gated capability needs evidence", gated, `{"bill_id":"B1"}`, want{Err: invalid("evidence")}},
		{"gated capability takes evidence", gated, `{"bill_id":"B1","evidence":{"bill_id":"B1"}}`,
			want{Payload: map[string]any{"bill_id": "B1"}, Scope: map[string]string{}, Evidence: `{"bill_id":"B1"}`}},
		{"scope fields", scoped, `{"program":"p","relationship":"r","since":"2026-01-01"}`,
			want{Payload: map[string]any{"since": "2026-01-01"}, Scope: map[string]string{"program": "p", "relationship": "r"}}},
		{"scope field missing", scoped, `{"program":"p"}`, want{Err: invalid("relationship")}},
		{"scope field empty", scoped, `{"program":"","relationship":"r"}`, want{Err: invalid("program")}},
		{"scope field not a string", scoped, `{"program":1,"relationship":"r"}`, want{Err: invalid("program")}},
		{"scope field in another case", scoped, `{"Program":"p","relationship":"r"}`, want{Err: invalid("Program")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := splitArgs(tt.c, json.RawMessage(tt.raw))
			got := want{Err: refusalOf(t, err)}
			if err == nil {
				got.Payload, got.Scope, got.Key, got.Evidence = a.payload, a.scope, a.idempotencyKey, string(a.evidence)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("splitArgs(%s) (-want +got):\n%s", tt.raw, diff)
			}
		})
	}
}

func TestScopeInPayload(t *testing.T) {
	s := newDemoService(t)
	for _, tt := range []struct {
		ws      string
		payload map[string]any
		want    refusal
	}{
		{"partner-programs", map[string]any{"since": "2026-01-01"}, refusal{}},
		{"partner-programs", map[string]any{"program": "x"}, invalid("payload.program")},
		{"partner-programs", map[string]any{"Relationship": "x"}, invalid("payload.Relationship")},
		{demoWS, map[string]any{"workspace": "other"}, invalid("payload.workspace")},
		{demoWS, map[string]any{"SCOPE": map[string]any{}}, invalid("payload.SCOPE")},
		{demoWS, map[string]any{"program": "x"}, refusal{}}, // not a scope of this workspace
		{"no-such-workspace", map[string]any{"scope": 1}, invalid("payload.scope")},
	} {
		got := refusalOf(t, s.scopeInPayload(tt.ws, tt.payload))
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("scopeInPayload(%s, %v) (-want +got):\n%s", tt.ws, tt.payload, diff)
		}
	}
}

func TestItemFor(t *testing.T) {
	withItem := ladder.Capability{ID: "x:post", Item: "bill_id"}
	nested := ladder.Capability{ID: "x:post", Item: "/load/id"}
	noItem := ladder.Capability{ID: "x:post"}
	args := func(payload map[string]any, scope map[string]string) capabilityArgs {
		return capabilityArgs{payload: payload, scope: scope}
	}
	hashA, err := itemFor(noItem, args(map[string]any{"a": 1}, map[string]string{"program": "p"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		c    ladder.Capability
		a    capabilityArgs
		item string
		err  refusal
	}{
		{"string id", withItem, args(map[string]any{"bill_id": "B-1"}, nil), "B-1", refusal{}},
		{"integer id", withItem, args(map[string]any{"bill_id": json.Number("42")}, nil), "42", refusal{}},
		{"nested path", nested, args(map[string]any{"load": map[string]any{"id": "L-7"}}, nil), "L-7", refusal{}},
		{"missing", withItem, args(map[string]any{}, nil), "", invalid("payload.bill_id")},
		{"empty string", withItem, args(map[string]any{"bill_id": ""}, nil), "", invalid("payload.bill_id")},
		{"object", withItem, args(map[string]any{"bill_id": map[string]any{}}, nil), "", invalid("payload.bill_id")},
		{"nested missing", nested, args(map[string]any{"load": "L-7"}, nil), "", invalid("payload.load.id")},
		{"too long", withItem, args(map[string]any{"bill_id": strings.Repeat("b", 513)}, nil), "", invalid("payload.bill_id")},
		{"no item field: same payload and scope, same item", noItem, args(map[string]any{"a": 1}, map[string]string{"program": "p"}), hashA, refusal{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			item, err := itemFor(tt.c, tt.a)
			if diff := cmp.Diff(tt.err, refusalOf(t, err)); diff != "" {
				t.Errorf("refusal (-want +got):\n%s", diff)
			}
			if item != tt.item {
				t.Errorf("item %q, want %q", item, tt.item)
			}
		})
	}
	other, _ := itemFor(noItem, args(map[string]any{"a": 1}, map[string]string{"program": "q"}))
	if other == hashA || !strings.HasPrefix(hashA, "call-") {
		t.Errorf("items without an item field: %q and %q, want distinct call- items", hashA, other)
	}
}

func TestArgSizes(t *testing.T) {
	c := ladder.Capability{ID: "x:post", MaxPayloadBytes: 20, MaxEvidenceBytes: 20}
	for _, tt := range []struct {
		name              string
		c                 ladder.Capability
		payload, evidence string
		want              refusal
	}{
		{"within limits", c, `{"a":1}`, `{"b":2}`, refusal{}},
		{"payload at the limit", c, `{"a":"` + strings.Repeat("x", 12) + `"}`, ``, refusal{}},
		{"payload over the limit", c, `{"a":"` + strings.Repeat("x", 13) + `"}`, ``, invalid("payload")},
		{"evidence counted canonical", c, `{}`, `{ "b" :  "` + strings.Repeat("x", 12) + `" }`, refusal{}},
		{"evidence over the limit", c, `{}`, `{"b":"` + strings.Repeat("x", 13) + `"}`, invalid("evidence")},
		{"unset limits default to 64 KiB", ladder.Capability{ID: "x:post"}, `{"a":"` + strings.Repeat("x", 64<<10) + `"}`, ``, invalid("payload")},
		{"unset limits allow a few KiB", ladder.Capability{ID: "x:post"}, `{"a":"` + strings.Repeat("x", 4<<10) + `"}`, `{"b":"` + strings.Repeat("x", 4<<10) + `"}`, refusal{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ev json.RawMessage
			if tt.evidence != "" {
				ev = json.RawMessage(tt.evidence)
			}
			got := refusalOf(t, argSizes(tt.c, json.RawMessage(tt.payload), ev))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("argSizes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSameRequest(t *testing.T) {
	first := request{payload: json.RawMessage(`{"a":1,"b":"<"}`), scope: map[string]string{"program": "p"}, evidence: evidenceHash(json.RawMessage(`{"x":true}`))}
	for _, tt := range []struct {
		name string
		this request
		what string // "" when the repeat is the same request
	}{
		{"same", first, ""},
		{"payload spelled differently", request{payload: json.RawMessage(`{ "b":"\u003c", "a":1 }`), scope: map[string]string{"program": "p"}, evidence: evidenceHash(json.RawMessage(`{ "x" : true }`))}, ""},
		{"other payload", request{payload: json.RawMessage(`{"a":2,"b":"<"}`), scope: first.scope, evidence: first.evidence}, "payload"},
		{"payload not JSON", request{payload: json.RawMessage(`{`), scope: first.scope, evidence: first.evidence}, "payload"},
		{"other scope", request{payload: first.payload, scope: map[string]string{"program": "q"}, evidence: first.evidence}, "scope"},
		{"no scope", request{payload: first.payload, evidence: first.evidence}, "scope"},
		{"other evidence", request{payload: first.payload, scope: first.scope, evidence: evidenceHash(json.RawMessage(`{"x":false}`))}, "evidence"},
		{"no evidence", request{payload: first.payload, scope: first.scope}, "evidence"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := sameRequest("k1", first, tt.this, "call_id", "cl_1")
			if tt.what == "" {
				if err != nil {
					t.Fatalf("a repeat of the same request refused: %v", err)
				}
				return
			}
			le := ladder.AsError(err)
			got := map[string]any{"code": le.Code, "message": le.Message, "data": le.Data}
			want := map[string]any{"code": ladder.CodeIdempotencyKeyUsed,
				"message": fmt.Sprintf("The idempotency_key %q was used before with another %s.", "k1", tt.what),
				"data":    map[string]any{"call_id": "cl_1", "field": "idempotency_key"}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("sameRequest (-want +got):\n%s", diff)
			}
		})
	}
	if evidenceHash(nil) != "" || evidenceHash(json.RawMessage("  ")) != "" {
		t.Error("no evidence must hash to the empty string")
	}
}

func TestStoreErr(t *testing.T) {
	own := &ladder.Error{Code: ladder.CodeConflict, Message: "mine"}
	for _, tt := range []struct {
		name string
		err  error
		want ladder.Code
		same bool // the refusal is err's own *ladder.Error
	}{
		{"nil", nil, "", false},
		{"unavailable", fmt.Errorf("x: %w", ladder.ErrUnavailable), ladder.CodeAuditUnavailable, false},
		{"deadline", context.DeadlineExceeded, ladder.CodeAuditUnavailable, false},
		{"a refusal passes through", fmt.Errorf("wrapped: %w", own), ladder.CodeConflict, true},
		{"anything else", errors.New("disk on fire"), ladder.CodeAuditUnavailable, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := storeErr("op", tt.err)
			if tt.err == nil {
				if err != nil {
					t.Fatalf("storeErr(nil) = %v", err)
				}
				return
			}
			le := ladder.AsError(err)
			if le.Code != tt.want || (le == own) != tt.same {
				t.Errorf("storeErr(%v) = %v (code %s), want code %s", tt.err, err, le.Code, tt.want)
			}
			if !tt.same && !errors.Is(err, tt.err) {
				t.Errorf("storeErr(%v) does not wrap the cause", tt.err)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	s := newDemoService(t)
	st, err := s.FindStep(demoWS, "", "post_tms")
	if err != nil {
		t.Fatal(err)
	}
	type decision struct {
		Decision ladder.Decision
		Audit    bool
		Rate     float64
	}
	for _, tt := range []struct {
		lane ladder.Lane
		rate float64
		want decision
	}{
		{ladder.LaneAuto, 1, decision{ladder.DecisionActAlone, true, 1}},
		{ladder.LaneAuto, 0, decision{ladder.DecisionActAlone, false, 0}},
		{ladder.LaneAuto, 0.123456, decision{ladder.DecisionActAlone, s.sampled(demoWS, "bills", "post_tms", "B-1", 0.123456), 0.1235}},
		{ladder.LanePropose, 1, decision{ladder.DecisionPropose, false, 1}},
		{ladder.LaneShadow, 1, decision{ladder.DecisionHumanOnly, false, 1}},
		{ladder.LaneHumanOnly, 1, decision{ladder.DecisionHumanOnly, false, 1}},
	} {
		r := s.Decide(demoWS, st, ladder.StepState{Lane: tt.lane, AuditRate: tt.rate}, "B-1")
		got := decision{r.Decision, r.Audit, r.AuditRate}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Decide in %s at rate %v (-want +got):\n%s", tt.lane, tt.rate, diff)
		}
		if r.Lane != tt.lane || r.Step != "post_tms" || r.Queue != "bills" || r.Item != "B-1" || !strings.HasPrefix(r.Reason, st.Name) {
			t.Errorf("Decide in %s: %+v", tt.lane, r)
		}
	}
}

// TestAuditSampling: the same item gets the same answer every time, from
// any Service with the same secret; the share sampled follows the rate;
// another secret samples other items.
func TestAuditSampling(t *testing.T) {
	s := newDemoService(t)
	other, err := New(Options{Store: s.store, AuditSecret: []byte("another secret")})
	if err != nil {
		t.Fatal(err)
	}
	same, err := New(Options{Store: s.store, AuditSecret: []byte("service-test")})
	if err != nil {
		t.Fatal(err)
	}
	const n = 4000
	var sampled, differ int
	for i := range n {
		item := fmt.Sprintf("B-%d", i)
		a := s.sampled(demoWS, "bills", "post_tms", item, 0.25)
		if a != s.sampled(demoWS, "bills", "post_tms", item, 0.25) || a != same.sampled(demoWS, "bills", "post_tms", item, 0.25) {
			t.Fatalf("item %s sampled differently on a second ask", item)
		}
		if a && !s.sampled(demoWS, "bills", "post_tms", item, 0.5) {
			t.Fatalf("item %s sampled at 0.25 but not at 0.5", item)
		}
		if a {
			sampled++
		}
		if a != other.sampled(demoWS, "bills", "post_tms", item, 0.25) {
			differ++
		}
	}
	if sampled < n*20/100 || sampled > n*30/100 {
		t.Errorf("%d of %d items sampled at rate 0.25", sampled, n)
	}
	if differ == 0 {
		t.Error("another secret samples the very same items")
	}
	if s.sampled(demoWS, "bills", "post_tms", "x", 0) || !s.sampled(demoWS, "bills", "post_tms", "x", 1) {
		t.Error("rate 0 must never sample and rate 1 always")
	}
}

func TestRouteRefusals(t *testing.T) {
	s := newDemoService(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		req  ladder.RouteRequest
		want refusal
	}{
		{"no item", ladder.RouteRequest{Step: "post_tms", Item: "  "}, invalid("item")},
		{"item too long", ladder.RouteRequest{Step: "post_tms", Item: strings.Repeat("i", 513)}, invalid("item")},
		{"no step", ladder.RouteRequest{Item: "B-1"}, invalid("step")},
		{"unknown queue", ladder.RouteRequest{Queue: "nope", Step: "post_tms", Item: "B-1"}, refusal{Code: ladder.CodeStepNotFound, Field: "queue"}},
		{"bad features", ladder.RouteRequest{Step: "post_tms", Item: "B-1", Features: json.RawMessage(`{"a":`)}, invalid("features")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Route(ctx, demoAgent, tt.req)
			if diff := cmp.Diff(tt.want, refusalOf(t, err)); diff != "" {
				t.Errorf("Route (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRouteLaneEpochs: a repeated route of one item answers the first
// route while the lane holds; a pin to another lane starts a new epoch and
// the item is decided afresh under the new lane; unpinning keeps the lane.
func TestRouteLaneEpochs(t *testing.T) {
	s := newDemoService(t)
	ctx := context.Background()
	route := func(item string) ladder.Route {
		t.Helper()
		r, err := s.Route(ctx, demoAgent, ladder.RouteRequest{Step: "read_bill", Item: item, Features: json.RawMessage(`{ "pages" : 2 }`)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := route("B-1")
	if first.Lane != ladder.LaneAuto || first.Decision != ladder.DecisionActAlone || string(first.Features) != `{"pages":2}` {
		t.Errorf("first route: %+v", first)
	}
	if again := route("B-1"); again.ID != first.ID {
		t.Errorf("a repeated route in the same lane got a new route %s, want %s", again.ID, first.ID)
	}
	if other := route("B-2"); other.ID == first.ID {
		t.Error("another item got the first item's route")
	}
	pinned, err := s.Pin(ctx, demoHuman, "bills", "read_bill", ladder.PinRequest{Lane: string(ladder.LaneShadow), Reason: "checking a new carrier format"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if !pinned.Pinned || pinned.Lane != ladder.LaneShadow {
		t.Errorf("pinned state: %+v", pinned)
	}
	after := route("B-1")
	if after.ID == first.ID || after.Lane != ladder.LaneShadow || after.Decision != ladder.DecisionHumanOnly || after.LaneEpoch == first.LaneEpoch {
		t.Errorf("route after a pin to shadow: %+v (first %+v)", after, first)
	}
	unpinned, err := s.Pin(ctx, demoHuman, "bills", "read_bill", ladder.PinRequest{Reason: "done"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if unpinned.Pinned || unpinned.Lane != ladder.LaneShadow {
		t.Errorf("unpinned state: %+v", unpinned)
	}
}

func TestPinRefusals(t *testing.T) {
	s := newDemoService(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name        string
		queue, step string
		req         ladder.PinRequest
		pin         bool
		want        refusal
	}{
		{"no reason", "bills", "post_tms", ladder.PinRequest{Lane: "auto", Reason: " "}, true, invalid("reason")},
		{"unknown lane", "bills", "post_tms", ladder.PinRequest{Lane: "turbo", Reason: "r"}, true, invalid("lane")},
		{"no lane", "bills", "post_tms", ladder.PinRequest{Reason: "r"}, true, invalid("lane")},
		{"unknown queue", "nope", "post_tms", ladder.PinRequest{Lane: "auto", Reason: "r"}, true, refusal{Code: ladder.CodeStepNotFound, Field: "queue"}},
		{"unpin a step not pinned", "bills", "post_tms", ladder.PinRequest{Reason: "r"}, false, refusal{Code: ladder.CodeConflict}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Pin(ctx, demoHuman, tt.queue, tt.step, tt.req, tt.pin)
			if diff := cmp.Diff(tt.want, refusalOf(t, err)); diff != "" {
				t.Errorf("Pin (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecordOutcome(t *testing.T) {
	s := newDemoService(t)
	ctx := context.Background()
	yes := true
	for _, tt := range []struct {
		name string
		req  ladder.OutcomeRequest
		want refusal
	}{
		{"no handled_by", ladder.OutcomeRequest{Step: "rate_check", Item: "B-1", OK: &yes}, invalid("handled_by")},
		{"unknown handled_by", ladder.OutcomeRequest{Step: "rate_check", Item: "B-1", HandledBy: "robot", OK: &yes}, invalid("handled_by")},
		{"no ok", ladder.OutcomeRequest{Step: "rate_check", Item: "B-1", HandledBy: ladder.HandledByAgent}, invalid("ok")},
		{"no item", ladder.OutcomeRequest{Step: "rate_check", HandledBy: ladder.HandledByAgent, OK: &yes}, invalid("item")},
		{"unknown queue", ladder.OutcomeRequest{Queue: "nope", Step: "rate_check", Item: "B-1", HandledBy: ladder.HandledByAgent, OK: &yes}, refusal{Code: ladder.CodeStepNotFound, Field: "queue"}},
		{"recorded", ladder.OutcomeRequest{Step: "rate_check", Item: "B-1", HandledBy: ladder.HandledByPerson, OK: &yes}, refusal{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := s.RecordOutcome(ctx, demoAgent, tt.req)
			if diff := cmp.Diff(tt.want, refusalOf(t, err)); diff != "" {
				t.Errorf("RecordOutcome (-want +got):\n%s", diff)
			}
			if err == nil && (o.Queue != "bills" || o.Step != "rate_check" || o.HandledBy != ladder.HandledByPerson || !o.OK || o.ID == "") {
				t.Errorf("recorded outcome: %+v", o)
			}
		})
	}
	oc, err := s.store.OutcomeCounts(ctx, ladder.StepKey{Workspace: demoWS, Queue: "bills", Step: "rate_check"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ladder.OutcomeCounts{PersonN: 1}, oc); diff != "" {
		t.Errorf("outcome counts after one recorded outcome (-want +got):\n%s", diff)
	}
}

func TestListApprovals(t *testing.T) {
	s := newDemoService(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name           string
		status, cursor string
		limit          int
		want           refusal
	}{
		{"negative limit", "", "", -1, invalid("limit")},
		{"limit over 500", "", "", 501, invalid("limit")},
		{"unknown status", "waiting", "", 0, invalid("status")},
		{"foreign cursor", "", "gh1:5", 0, refusal{Code: ladder.CodeBadCursor, Field: "cursor"}},
		{"garbage cursor", "", "nonsense", 0, refusal{Code: ladder.CodeBadCursor, Field: "cursor"}},
		{"empty list", "pending", "", 0, refusal{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.ListApprovals(ctx, demoHuman, tt.status, tt.cursor, tt.limit)
			if diff := cmp.Diff(tt.want, refusalOf(t, err)); diff != "" {
				t.Errorf("ListApprovals (-want +got):\n%s", diff)
			}
		})
	}

	// Five proposals at rate_check (propose), paged two at a time: each
	// once, newest first.
	var want []string
	for i := range 5 {
		raw := fmt.Sprintf(`{"bill_id":"B-%d","linehaul_usd":1850,"fuel_surcharge_usd":212.5,"idempotency_key":"rate-%d"}`, i, i)
		res, err := s.CallCapability(ctx, demoAgent, "rates:approveRate", json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != ladder.CallResultApprovalRequested || res.ApprovalID == "" {
			t.Fatalf("call %d: %+v", i, res)
		}
		want = append([]string{res.ApprovalID}, want...)
	}
	var got []string
	pages := 0
	for cursor := ""; ; {
		page, err := s.ListApprovals(ctx, demoHuman, "pending", cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, v := range page.Approvals {
			got = append(got, v.ID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
		if pages > 5 {
			t.Fatal("paging does not end")
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pending approvals paged by 2 (-want +got):\n%s", diff)
	}
	if pages != 3 {
		t.Errorf("%d pages of 2 for 5 approvals, want 3", pages)
	}
	approved, err := s.ListApprovals(ctx, demoHuman, "approved", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(approved.Approvals) != 0 || approved.NextCursor != "" {
		t.Errorf("approved approvals before any decision: %+v", approved)
	}
}

func TestGateFunctionsAndAuthorizeRefusals(t *testing.T) {
	s := newDemoService(t)
	ctx := context.Background()
	all, err := s.GateFunctions(demoWS, "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"release_payment"}, all.CaseIDs); diff != "" {
		t.Errorf("case ids (-want +got):\n%s", diff)
	}
	one, err := s.GateFunctions(demoWS, "release_payment")
	if err != nil || len(one.Cases) != 1 || !strings.Contains(one.Sentence, "score_release_hold") {
		t.Errorf("GateFunctions(release_payment) = %+v, %v", one, err)
	}
	none, err := s.GateFunctions("partner-programs", "")
	if err != nil || len(none.CaseIDs) != 0 || !strings.Contains(none.Sentence, "no gate cases") {
		t.Errorf("GateFunctions of a workspace without cases = %+v, %v", none, err)
	}
	for _, tt := range []struct {
		ws, caseID string
		want       refusal
	}{
		{demoWS, "no_such_case", refusal{Code: ladder.CodeUnknownCase, Field: "case"}},
		{"partner-programs", "release_payment", refusal{Code: ladder.CodeUnknownCase, Field: "case"}},
	} {
		_, err := s.GateFunctions(tt.ws, tt.caseID)
		if diff := cmp.Diff(tt.want, refusalOf(t, err)); diff != "" {
			t.Errorf("GateFunctions(%s, %s) (-want +got):\n%s", tt.ws, tt.caseID, diff)
		}
	}

	for _, tt := range []struct {
		name string
		p    ladder.Principal
		req  ladder.AuthorizeRequest
		want refusal
	}{
		{"no case", demoAgent, ladder.AuthorizeRequest{PreconditionFn: "score_release_hold"}, refusal{Code: ladder.CodeUnknownCase, Field: "case"}},
		{"unknown case", demoAgent, ladder.AuthorizeRequest{Case: "nope", PreconditionFn: "score_release_hold", Evidence: json.RawMessage(`{}`)}, refusal{Code: ladder.CodeUnknownCase, Field: "case"}},
		{"workspace without cases", ladder.Principal{KeyID: "a2", Workspace: "partner-programs", Kind: ladder.KeyAgent}, ladder.AuthorizeRequest{Case: "release_payment", PreconditionFn: "score_release_hold"}, refusal{Code: ladder.CodeUnknownCase, Field: "case"}},
		{"unknown function", demoAgent, ladder.AuthorizeRequest{Case: "release_payment", PreconditionFn: "nope", Evidence: json.RawMessage(`{}`)}, refusal{Code: ladder.CodeUnknownFunction, Field: "precondition_fn"}},
		{"no function", demoAgent, ladder.AuthorizeRequest{Case: "release_payment", Evidence: json.RawMessage(`{}`)}, refusal{Code: ladder.CodeUnknownFunction, Field: "precondition_fn"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Authorize(ctx, tt.p, tt.req)
			if diff := cmp.Diff(tt.want, refusalOf(t, err)); diff != "" {
				t.Errorf("Authorize (-want +got):\n%s", diff)
			}
		})
	}
}

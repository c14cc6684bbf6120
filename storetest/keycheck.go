package storetest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
)

// keyCheckTests exercise ladder.RequireActiveKey: a write made under it
// commits only while its key is active at the commit, whatever the caller
// believed of the key when it decided.
var keyCheckTests = []struct {
	name string
	fn   func(t *testing.T, s ladder.Store)
}{
	{"KeyCheckAtCommit", testKeyCheckAtCommit},
	{"KeyCheckInOneBatch", testKeyCheckInOneBatch},
}

// activeKeys stores agent keys of wsA: ids as given, each active unless
// expired is set, which gives it an expiry in the past.
func activeKeys(t *testing.T, s ladder.Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		sum := sha256.Sum256([]byte("secret of " + id))
		k := ladder.Key{ID: id, Workspace: wsA, Kind: ladder.KeyAgent, SecretHash: sum[:], CreatedAt: t0}
		check(t, s.CreateKey(t.Context(), k, entry(t, wsA, ladder.AuditKeyCreate, id, t0, nil)))
	}
}

func testKeyCheckAtCommit(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	check(t, s.EnsureSteps(ctx, []ladder.StepState{stateOf(stepKey, ladder.LaneAuto)}))
	activeKeys(t, s, "k-live", "k-gone")
	sum := sha256.Sum256([]byte("old"))
	expired := t0.Add(time.Hour) // before the store's clock
	check(t, s.CreateKey(ctx, ladder.Key{ID: "k-old", Workspace: wsA, Kind: ladder.KeyAgent, SecretHash: sum[:], CreatedAt: t0, ExpiresAt: &expired},
		entry(t, wsA, ladder.AuditKeyCreate, "k-old", t0, nil)))
	route := func(ctx context.Context, item string) error {
		r := newRoute("rt_"+item, wsA, item, t0)
		_, _, err := s.RecordRoute(ctx, r, routeAudit(t, r))
		return err
	}

	// An active key: the write commits and the check is confirmed.
	live, kc := ladder.RequireActiveKey(ctx, "k-live")
	check(t, route(live, "B-live"))
	if !kc.Confirmed() || kc.Refused() {
		t.Errorf("a write under an active key committed: confirmed %v, refused %v; want confirmed only", kc.Confirmed(), kc.Refused())
	}
	r, ra, c, ca := actAlone(t, "rt_call", "cl_call", "", "B-call", 0)
	rc := must(s.RouteAndBeginCall(live, r, ra, c, ca))
	if !rc.RouteCreated || !rc.CallCreated {
		t.Errorf("route and call under an active key: %+v, want both created", rc)
	}

	// Revoked, expired or unknown at commit: nothing is written, whatever
	// the caller knew of the key when it decided.
	revoked := t0.Add(2 * time.Hour)
	check(t, s.RevokeKey(ctx, "k-gone", revoked, entry(t, wsA, ladder.AuditKeyRevoke, "k-gone", revoked, nil)))
	before := kindsAndSubjects(t, s)
	for _, id := range []string{"k-gone", "k-old", "k-never-stored"} {
		kctx, kc := ladder.RequireActiveKey(ctx, id)
		wantErr(t, "route under key "+id, route(kctx, "B-"+id), ladder.ErrKeyInactive)
		r, ra, c, ca := actAlone(t, "rt_c"+id, "cl_"+id, "", "B-c"+id, 0)
		_, err := s.RouteAndBeginCall(kctx, r, ra, c, ca)
		wantErr(t, "route and call under key "+id, err, ladder.ErrKeyInactive)
		if kc.Confirmed() || !kc.Refused() {
			t.Errorf("key %s: refused writes left the check confirmed %v, refused %v; want refused only", id, kc.Confirmed(), kc.Refused())
		}
	}
	if got := kindsAndSubjects(t, s); !slices.Equal(got, before) {
		t.Errorf("refused writes changed the audit log:\n got %v\nwant %v", got, before)
	}

	// A write that completes work the key started is not checked.
	gone, _ := ladder.RequireActiveKey(ctx, "k-gone")
	check(t, route(ladder.WithoutKeyCheck(gone), "B-after"))
	// Without a check, as before: the caller vouches for the key.
	check(t, route(ctx, "B-unchecked"))
}

// testKeyCheckInOneBatch sends writes of several live keys, revoked keys
// and a key never stored at once, so that the store's batches mix them:
// each live one commits, each other one is refused, and the chain stays
// whole (Run verifies it).
func testKeyCheckInOneBatch(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	check(t, s.EnsureSteps(ctx, []ladder.StepState{stateOf(stepKey, ladder.LaneAuto)}))
	ids := []string{"k-live-0", "k-live-1", "k-live-2", "k-gone-0", "k-gone-1", "k-never-stored"}
	live := func(i int) bool { return i%len(ids) < 3 }
	activeKeys(t, s, ids[:5]...)
	for _, id := range ids[3:5] {
		check(t, s.RevokeKey(ctx, id, t0, entry(t, wsA, ladder.AuditKeyRevoke, id, t0, nil)))
	}
	const n = 48
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			kctx, _ := ladder.RequireActiveKey(ctx, ids[i%len(ids)])
			r := newRoute(fmt.Sprintf("rt_%d", i), wsA, fmt.Sprintf("B-%d", i), t0)
			_, _, errs[i] = s.RecordRoute(kctx, r, routeAudit(t, r))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if live(i) {
			check(t, err)
		} else {
			wantErr(t, fmt.Sprintf("route %d of key %s", i, ids[i%len(ids)]), err, ladder.ErrKeyInactive)
		}
	}
	got := map[string]bool{}
	for _, ks := range kindsAndSubjects(t, s) {
		got[ks] = true
	}
	for i := range n {
		if stored := got[ladder.AuditRoute+"/"+fmt.Sprintf("rt_%d", i)]; stored != live(i) {
			t.Errorf("route rt_%d (key %s) stored = %v, want %v", i, ids[i%len(ids)], stored, live(i))
		}
	}
}

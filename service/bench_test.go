package service_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/service"
	"github.com/ladderhq/ladder/sqlite"
)

func benchService(b *testing.B, now time.Time) (*service.Service, ladder.Store) {
	b.Helper()
	cfg, err := config.Parse("demo.yaml", config.Demo())
	if err != nil {
		b.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	var wss []ladder.Workspace
	for i := range cfg.Workspaces {
		wss = append(wss, cfg.Workspaces[i].Domain())
	}
	svc, err := service.New(service.Options{Store: st, Workspaces: wss, AuditSecret: []byte("bench"), Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	if err := st.EnsureSteps(context.Background(), svc.InitialStates()); err != nil {
		b.Fatal(err)
	}
	return svc, st
}

// BenchmarkDecide measures the route decision without I/O: the lane →
// decision mapping, the blind audit sample (HMAC-SHA256) and the reason.
func BenchmarkDecide(b *testing.B) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	svc, st := benchService(b, now)
	step, err := svc.FindStep("vantrow-bills", "", "post_tms")
	if err != nil {
		b.Fatal(err)
	}
	state, err := st.GetStepState(context.Background(), ladder.StepKey{Workspace: "vantrow-bills", Queue: "bills", Step: "post_tms"})
	if err != nil {
		b.Fatal(err)
	}
	items := make([]string, 1024)
	for i := range items {
		items[i] = fmt.Sprintf("BILL-%d", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r := svc.Decide("vantrow-bills", step, state, items[i&1023])
		if r.Decision != ladder.DecisionActAlone {
			b.Fatal(r.Decision)
		}
	}
}

// BenchmarkEvidencePackMillionReviews seeds one step with 1,000,000 stored
// reviews over 52 weeks (rows and their weekly aggregates) and measures the
// evidence pack, which reads the aggregates, not the reviews.
func BenchmarkEvidencePackMillionReviews(b *testing.B) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	svc, st := benchService(b, now)
	ctx := context.Background()
	const total, weeks, batch = 1_000_000, 52, 100_000
	key := ladder.StepKey{Workspace: "vantrow-bills", Queue: "bills", Step: "decide_hold"}
	_, thisWeek := ladder.ISOWeek(now)
	first := thisWeek.AddDate(0, 0, -7*(weeks-1))
	perWeek := total / weeks
	// The reviews and their week rows are written as an import writes
	// them (ImportTx), in batches.
	for done := 0; done < total; done += batch {
		err := st.ImportRecords(ctx, func(tx ladder.ImportTx) error {
			for i := done; i < min(done+batch, total); i++ {
				w := min(i/perWeek, weeks-1)
				at := first.AddDate(0, 0, 7*w).Add(time.Duration(i%perWeek) * time.Second)
				v := ladder.VerdictAgree
				if i%100 >= 93 {
					v = ladder.VerdictDisagree
				}
				rv := ladder.Review{ID: fmt.Sprintf("rv_%d", i), RouteID: fmt.Sprintf("rt_%d", i), Workspace: key.Workspace, Queue: key.Queue, Step: key.Step,
					Item: fmt.Sprintf("BILL-%d", i), Kind: ladder.ReviewShadow, Verdict: v, Reviewer: "bench", At: at}
				if err := tx.InsertRoute(ladder.Route{ID: rv.RouteID, Workspace: rv.Workspace, Queue: rv.Queue, Step: rv.Step, Item: rv.Item, Lane: ladder.LaneShadow, Decision: ladder.DecisionFor(ladder.LaneShadow), KeyID: "bench", At: at}); err != nil {
					return err
				}
				iso, start := ladder.ISOWeek(at)
				if err := tx.InsertReview(rv, iso, 0); err != nil {
					return err
				}
				if err := tx.AddToWeek(ladder.CountDelta(rv, iso, start, 0)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p, err := svc.Evidence(ctx, key.Workspace, "", "Decide hold or release")
		if err != nil {
			b.Fatal(err)
		}
		if p.Figures.Weekly[weeks-1].N == 0 {
			b.Fatal("no figures")
		}
	}
}

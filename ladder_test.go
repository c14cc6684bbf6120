package ladder_test

import (
	"go/build"
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
)

// The domain package must stay plain Go: its imports are the standard
// library's and nothing else (DESIGN.md §9).
func TestDomainImportsOnlyStandardLibrary(t *testing.T) {
	pkg, err := build.Default.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		first := strings.Split(imp, "/")[0]
		if strings.Contains(first, ".") {
			t.Errorf("domain package imports %q, which is not in the standard library", imp)
		}
	}
}

func TestISOWeek(t *testing.T) {
	tests := []struct {
		at        string
		want      string
		wantStart string
	}{
		{"2026-08-24T10:00:00Z", "2026-W35", "2026-08-24"},
		{"2026-08-30T23:59:59Z", "2026-W35", "2026-08-24"},
		{"2027-01-01T00:00:00Z", "2026-W53", "2026-12-28"},
		{"2024-12-30T00:00:00Z", "2025-W01", "2024-12-30"},
	}
	for _, tt := range tests {
		at, _ := time.Parse(time.RFC3339, tt.at)
		got, start := ladder.ISOWeek(at)
		if got != tt.want || start.Format("2006-01-02") != tt.wantStart {
			t.Errorf("ISOWeek(%s) = %s %s, want %s %s", tt.at, got, start.Format("2006-01-02"), tt.want, tt.wantStart)
		}
	}
}

func TestChainVerifierNamesFirstBadRecord(t *testing.T) {
	at := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var recs []ladder.AuditRecord
	prev := ""
	for i := 1; i <= 3; i++ {
		e, err := ladder.NewAuditEntry("ws", "k1", ladder.AuditRoute, "rt_x", at, map[string]any{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		r := ladder.AuditRecord{Seq: int64(i), AuditEntry: e}
		r.Seal(prev)
		prev = r.Hash
		recs = append(recs, r)
	}
	var v ladder.ChainVerifier
	for _, r := range recs {
		if err := v.Check(r); err != nil {
			t.Fatalf("intact chain: %v", err)
		}
	}
	recs[1].Data = []byte(`{"i":99}`)
	v = ladder.ChainVerifier{}
	var bad error
	for _, r := range recs {
		if bad = v.Check(r); bad != nil {
			break
		}
	}
	if bad == nil || !strings.Contains(bad.Error(), "audit record 2") {
		t.Fatalf("tampered chain: got %v, want an error naming record 2", bad)
	}
}

// TestChainVerifierPerWorkspace: up to GlobalThrough the records form one
// chain in seq order with no gap; after it each chains to its workspace's
// previous record, seqs may skip, and a record chained to another
// workspace's, a missing record or records out of order are named.
func TestChainVerifierPerWorkspace(t *testing.T) {
	at := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	rec := func(seq int64, ws, prev string) ladder.AuditRecord {
		e, err := ladder.NewAuditEntry(ws, "k1", ladder.AuditRoute, "rt_x", at, map[string]any{"seq": seq})
		if err != nil {
			t.Fatal(err)
		}
		r := ladder.AuditRecord{Seq: seq, AuditEntry: e}
		r.Seal(prev)
		return r
	}
	// Two global records (a, b), then per-workspace ones with a seq gap.
	g1 := rec(1, "a", "")
	g2 := rec(2, "b", g1.Hash)
	a3 := rec(3, "a", g1.Hash)
	b5 := rec(5, "b", g2.Hash)
	a6 := rec(6, "a", a3.Hash)
	for _, tc := range []struct {
		name    string
		through int64
		recs    []ladder.AuditRecord
		want    string // "" for intact
	}{
		{"global then per workspace", 2, []ladder.AuditRecord{g1, g2, a3, b5, a6}, ""},
		{"per workspace from the start", 0, []ladder.AuditRecord{rec(1, "a", ""), rec(4, "b", "")}, ""},
		{"a gap in the global chain", 3, []ladder.AuditRecord{g1, g2, b5}, "expected seq 3"},
		{"the global chain's end missing", 3, []ladder.AuditRecord{g1, g2}, "records were deleted from its end"},
		{"chained to another workspace", 2, []ladder.AuditRecord{g1, g2, rec(3, "a", g2.Hash)}, "workspace a's previous record"},
		{"a workspace's record missing", 2, []ladder.AuditRecord{g1, g2, a3, b5, rec(7, "a", a6.Hash)}, "audit record 7"},
		{"a first record with a prev_hash", 0, []ladder.AuditRecord{rec(1, "a", ""), rec(2, "c", g1.Hash)}, "first record of workspace c"},
		{"out of order", 2, []ladder.AuditRecord{g1, g2, b5, a3}, "audit record 3: follows record 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := ladder.ChainVerifier{GlobalThrough: tc.through}
			var err error
			for _, r := range tc.recs {
				if err = v.Check(r); err != nil {
					break
				}
			}
			if err == nil {
				err = v.End()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("intact chains: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

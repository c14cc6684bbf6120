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

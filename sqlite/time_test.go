package sqlite

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestFmtTimeIsFormat holds fmtTime's digit-by-digit writing to what
// time.Format writes for timeLayout: edge times, and times of every year
// from before 0 to past 9999 in zones off UTC and with nanoseconds below
// the microsecond the store keeps. A stored time that differed would sort
// out of place among the others and parse back to another instant.
func TestFmtTimeIsFormat(t *testing.T) {
	east := time.FixedZone("east", 5*3600+30*60)
	west := time.FixedZone("west", -(9*3600 + 15*60))
	times := []time.Time{
		{},
		time.Date(2026, 12, 4, 3, 4, 5, 6000, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
		time.Date(9999, 12, 31, 23, 0, 0, 0, west), // year 10000 in UTC
		time.Date(10000, 1, 1, 0, 0, 0, 0, east),   // year 9999 in UTC
		time.Date(2000, 2, 29, 12, 0, 0, 0, east),
		time.Unix(0, 0),
	}
	r := rand.New(rand.NewPCG(1, 2))
	min := time.Date(-200, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	max := time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for range 200000 {
		at := time.Unix(min+r.Int64N(max-min), r.Int64N(1e9))
		switch r.IntN(3) {
		case 1:
			at = at.In(east)
		case 2:
			at = at.In(west)
		}
		times = append(times, at)
	}
	for _, at := range times {
		want := ""
		if !at.IsZero() {
			want = normTime(at).Format(timeLayout)
		}
		if got := fmtTime(at); got != want {
			t.Fatalf("fmtTime(%v) = %q, Format writes %q", at, got, want)
		}
	}
}

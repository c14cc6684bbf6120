package ladder

import (
	"regexp"
	"testing"
	"time"
)

// TestNewIDSortsByTime: an id is its prefix, the time and 80 random bits,
// in characters that sort as their values do, so ids made later sort later
// (what keeps a store's id index appending at its end) and two ids made in
// the same millisecond still differ.
func TestNewIDSortsByTime(t *testing.T) {
	shape := regexp.MustCompile(`^rt_[0-9a-v]{26}$`)
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	prev := newIDAt("rt", t0)
	seen := map[string]bool{prev: true}
	for _, d := range []time.Duration{time.Millisecond, 31 * time.Millisecond, time.Second, 97 * time.Hour, 40 * 365 * 24 * time.Hour} {
		id := newIDAt("rt", t0.Add(d))
		if !shape.MatchString(id) {
			t.Fatalf("newIDAt(%v) = %q, not rt_ and 26 characters of 0-9a-v", t0.Add(d), id)
		}
		if id <= prev {
			t.Errorf("id at +%v %q does not sort after the one before it %q", d, id, prev)
		}
		prev = id
	}
	for range 1000 {
		id := newIDAt("rt", t0)
		if seen[id] {
			t.Fatalf("two ids of the same millisecond are equal: %q", id)
		}
		seen[id] = true
	}
	if got := NewID("ap"); !regexp.MustCompile(`^ap_[0-9a-v]{26}$`).MatchString(got) {
		t.Errorf("NewID(ap) = %q", got)
	}
}

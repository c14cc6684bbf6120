package ladder

import (
	"crypto/rand"
	"encoding/base32"
	"regexp"
	"strings"
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

// TestIDEncodingIsBase32Hex: ids are written as they always were,
// base32hex lowercased (stored ids and their order depend on it), now by
// an encoding with a lowercase alphabet.
func TestIDEncodingIsBase32Hex(t *testing.T) {
	if n := idEncoding.EncodedLen(16); n != idLen {
		t.Fatalf("16 bytes encode to %d characters, idLen is %d", n, idLen)
	}
	old := base32.HexEncoding.WithPadding(base32.NoPadding)
	for i := range 2000 {
		var b [16]byte
		if i > 0 {
			_, _ = rand.Read(b[:])
		}
		if i == 1 {
			b = [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		}
		if got, want := idEncoding.EncodeToString(b[:]), strings.ToLower(old.EncodeToString(b[:])); got != want {
			t.Fatalf("%x encodes to %q, was %q", b, got, want)
		}
	}
	at := time.Date(2026, 12, 4, 13, 0, 0, 0, time.UTC)
	id := newIDAt("rv", at)
	raw, err := old.DecodeString(strings.ToUpper(strings.TrimPrefix(id, "rv_")))
	if err != nil || len(raw) != 16 {
		t.Fatalf("%q does not decode as base32hex: %v", id, err)
	}
	if ms := uint64(raw[0])<<40 | uint64(raw[1])<<32 | uint64(raw[2])<<24 | uint64(raw[3])<<16 | uint64(raw[4])<<8 | uint64(raw[5]); ms != uint64(at.UnixMilli()) {
		t.Errorf("%q holds the time %d, want %d", id, ms, at.UnixMilli())
	}
}

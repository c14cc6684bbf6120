package service

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"testing"
)

// TestSampledMatchesPlainHMAC holds sampled, which hashes its parts from
// one pooled buffer, to the rule written out plainly: a fresh HMAC, each
// part and a zero byte written in turn. Parts of different lengths and
// with zero bytes of their own make a wrong buffer reuse show.
func TestSampledMatchesPlainHMAC(t *testing.T) {
	s := newDemoService(t)
	plain := func(rate float64, parts ...string) bool {
		m := hmac.New(sha256.New, s.auditSecret)
		for _, p := range parts {
			m.Write([]byte(p))
			m.Write([]byte{0})
		}
		sum := m.Sum(nil)
		return float64(binary.BigEndian.Uint64(sum[:8])>>11)/float64(1<<53) < rate
	}
	items := []string{"", "B-1", "a\x00b", "a much longer item name than the others, to grow the buffer"}
	var agree, sampled int
	for i := range 3000 {
		item := items[i%len(items)] + fmt.Sprint(i)
		ws, queue, step := demoWS, "bills", fmt.Sprint("step-", i%7)
		for _, rate := range []float64{0.05, 0.5, 0.95} {
			got, want := s.sampled(ws, queue, step, item, rate), plain(rate, ws, queue, step, item)
			if got != want {
				t.Fatalf("sampled(%q, %q, %q, %q, %v) = %v, the plain HMAC says %v", ws, queue, step, item, rate, got, want)
			}
			agree++
			if got {
				sampled++
			}
		}
	}
	if sampled == 0 || sampled == agree {
		t.Fatalf("%d of %d sampled: the comparison saw only one answer", sampled, agree)
	}
}

// BenchmarkSampled measures one audit sample, which reuses its pooled
// buffers (0 allocs/op outside the race detector, whose sync.Pool drops
// items on purpose): memory is measured here, never asserted in a test.
func BenchmarkSampled(b *testing.B) {
	s := newDemoService(b)
	b.ReportAllocs()
	for b.Loop() {
		s.sampled(demoWS, "bills", "post_tms", "B-1", 0.5)
	}
}

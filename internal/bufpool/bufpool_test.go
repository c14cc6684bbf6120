package bufpool

import "testing"

// A buffer comes back empty whatever was put, and one grown past the
// largest capacity is never handed out again.
func TestPool(t *testing.T) {
	p := New(8, 64)
	for range 100 {
		bp := p.Get()
		if len(*bp) != 0 || cap(*bp) > 64 {
			t.Fatalf("Get: len %d cap %d, want an empty buffer of at most 64", len(*bp), cap(*bp))
		}
		b := append(*bp, "some bytes"...)
		p.Put(bp, b)
		big := p.Get()
		p.Put(big, make([]byte, 0, 65))
	}
	p.Put(nil, nil) // a buffer not from the pool: nothing to keep
}

package ladder

import (
	"crypto/sha256"
	"sync"
	"testing"
)

// TestSum256 holds the pooled digest to sha256.Sum256, from many goroutines
// at once (a digest shared between two hashes would mix their inputs), on
// inputs from empty to past a block and a buffer's size.
func TestSum256(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for n := range 300 {
				b := make([]byte, n*7)
				for i := range b {
					b[i] = byte(g*31 + n + i)
				}
				if got, want := sum256(b), sha256.Sum256(b); got != want {
					t.Errorf("sum256 of %d bytes = %x, want %x", len(b), got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

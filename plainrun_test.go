package ladder

import (
	"strings"
	"testing"
)

// plainRunRef and htmlPlainRunRef are the byte-at-a-time definitions the
// word-at-a-time runs must match.
func plainRunRef(b []byte) int {
	for i, c := range b {
		if !plainByte(c) {
			return i
		}
	}
	return len(b)
}

func htmlPlainRunRef(b []byte) int {
	for i, c := range b {
		if c >= 0x80 || !jsonSafe(c) {
			return i
		}
	}
	return len(b)
}

// TestPlainRunEveryByte puts every byte value at every offset of a word
// and its neighbours, alone and after another stop byte, in runs of plain
// bytes of every length around a word's: a stop the word check misses, or
// a borrow that ends a run early, shows here.
func TestPlainRunEveryByte(t *testing.T) {
	for n := 0; n <= 26; n++ {
		for at := 0; at < n; at++ {
			for c := 0; c < 256; c++ {
				for _, second := range []int{-1, 0x00, 0x1f, 0x7f, 0x80, '"'} {
					b := []byte(strings.Repeat("a~ 0Zz!#", 4)[:n])
					b[at] = byte(c)
					if second >= 0 && at+1 < n {
						b[at+1] = byte(second)
					}
					if got, want := plainRun(b), plainRunRef(b); got != want {
						t.Fatalf("plainRun(%q) = %d, want %d", b, got, want)
					}
					if got, want := htmlPlainRun(string(b)), htmlPlainRunRef(b); got != want {
						t.Fatalf("htmlPlainRun(%q) = %d, want %d", b, got, want)
					}
				}
			}
		}
	}
}

// FuzzPlainRun holds both runs to their references on any bytes.
func FuzzPlainRun(f *testing.F) {
	for _, s := range []string{"", "plain ascii text, long enough for words", "ab\"cd", "héllo wörld, über alles", "<a href=x>&amp;</a> and more", "tab\there\x7f\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := plainRun(b), plainRunRef(b); got != want {
			t.Fatalf("plainRun(%q) = %d, want %d", b, got, want)
		}
		if got, want := htmlPlainRun(string(b)), htmlPlainRunRef(b); got != want {
			t.Fatalf("htmlPlainRun(%q) = %d, want %d", b, got, want)
		}
	})
}

package ladder

import (
	"encoding/binary"
	"math/bits"
)

// A JSON string's bytes are nearly all printable ASCII that needs no
// escape, and ladder's scanners (jsonScan, the canonicalizer,
// AppendJSONString) walked them a byte at a time: at six passes over a
// proxied answer that was the largest of ladder's own costs in a
// capability call (BENCHMARKS.md, issue 22, session 11). plainRun and
// htmlPlainRun skip such bytes eight at a time, and stop at the first byte
// the caller must look at. TestPlainRunEveryByte and FuzzPlainRun hold
// them to a byte-at-a-time reference.

const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// swarHas is nonzero (in its high bits) when a byte of w equals c. Its
// lowest flagged byte is the first match; bits above it can be set by the
// borrow, so only that one is read.
func swarHas(w uint64, c byte) uint64 {
	v := w ^ (swarOnes * uint64(c))
	return (v - swarOnes) &^ v
}

// swarStop flags (in their high bits) the bytes of w that are a control
// character (below 0x20), not ASCII (0x80 and up), '"' or '\\'; the
// lowest flagged byte is the first such byte. (A byte below 0x20 borrows
// in w-0x20…, setting its high bit; one of 0x80 or more has it set.)
func swarStop(w uint64) uint64 {
	return (w - swarOnes*0x20 | w | swarHas(w, '"') | swarHas(w, '\\')) & swarHigh
}

// plainRun returns how many of b's leading bytes are printable ASCII other
// than '"' and '\\': bytes a JSON string holds as they are.
func plainRun(b []byte) int {
	n := len(b)
	for len(b) >= 8 {
		if m := swarStop(binary.LittleEndian.Uint64(b)); m != 0 {
			return n - len(b) + bits.TrailingZeros64(m)>>3
		}
		b = b[8:]
	}
	for i, c := range b {
		if !plainByte(c) {
			return n - len(b) + i
		}
	}
	return n
}

// plainByte reports whether a JSON string holds c as it is (printable
// ASCII other than '"' and '\\'): what plainRun counts.
func plainByte(c byte) bool {
	return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'
}

// htmlPlainRun is plainRun for a string that also stops at '<', '>' and
// '&', which json.Marshal escapes: it counts the ASCII bytes jsonSafe
// passes. (Not one generic function with plainRun: a string has no
// one-load word read, and the generic version measured slower.)
func htmlPlainRun(s string) int {
	n := len(s)
	for len(s) >= 8 {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		if m := swarStop(w) | (swarHas(w, '<')|swarHas(w, '>')|swarHas(w, '&'))&swarHigh; m != 0 {
			return n - len(s) + bits.TrailingZeros64(m)>>3
		}
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || !jsonSafe(c) {
			return n - len(s) + i
		}
	}
	return n
}

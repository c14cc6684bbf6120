package http

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadBody: a body is read whole whatever length it states — its own,
// none, less or more than it has — and a read error comes back with what
// was read before it.
func TestReadBody(t *testing.T) {
	body := strings.Repeat("0123456789", 70)
	for _, tt := range []struct {
		name   string
		length int64
	}{
		{"stated", int64(len(body))},
		{"unknown", -1},
		{"none", 0},
		{"stated short", 10},
		{"stated long", int64(len(body)) + 50},
		{"over what is sized", sizedBodyBytes + 1},
		{"over the cap", MaxBodyBytes + 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// One byte a read, so the loop meets every boundary.
			got, err := readBody(iotest.OneByteReader(strings.NewReader(body)), tt.length)
			if err != nil || string(got) != body {
				t.Fatalf("readBody = %d bytes, %v; want the %d bytes", len(got), err, len(body))
			}
		})
	}
	// A header stating 1 MiB does not buy 1 MiB of the server's memory:
	// past sizedBodyBytes the buffer holds what arrived.
	if got, err := readBody(strings.NewReader("short"), MaxBodyBytes); err != nil || string(got) != "short" || cap(got) > sizedBodyBytes {
		t.Fatalf("a 5-byte body stating %d bytes: %q, %v, a buffer of %d bytes", MaxBodyBytes, got, err, cap(got))
	}
	boom := errors.New("connection reset")
	got, err := readBody(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), 100)
	if !errors.Is(err, boom) || string(got) != "abc" {
		t.Fatalf("readBody of a failing body = %q, %v; want abc, %v", got, err, boom)
	}
}

// TestReplayBodyBytes: Bytes hands over what Read has not, with the error
// that ended the door's read, and leaves nothing to read after.
func TestReplayBodyBytes(t *testing.T) {
	boom := errors.New("too large")
	b := &replayBody{Reader: bytes.NewReader([]byte("abcdef")), data: []byte("abcdef"), err: boom}
	p := make([]byte, 2)
	if n, err := b.Read(p); n != 2 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	rest, err := b.Bytes()
	if string(rest) != "cdef" || !errors.Is(err, boom) {
		t.Fatalf("Bytes = %q, %v; want cdef, %v", rest, err, boom)
	}
	if n, err := b.Read(p); n != 0 || !errors.Is(err, boom) {
		t.Fatalf("Read after Bytes = %d, %v; want 0, %v", n, err, boom)
	}
}

package mcpwire_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder/internal/mcpwire"
)

// readAll reads every event's data from stream, and the error that ended
// it.
func readAll(t *testing.T, stream string, maxLine int) ([]string, error) {
	t.Helper()
	events := mcpwire.NewEventReader(strings.NewReader(stream), maxLine)
	var got []string
	for {
		data, err := events.Next()
		if err != nil {
			return got, err
		}
		got = append(got, string(data))
	}
}

// TestEventReader reads the framings a server may use: several events,
// comments and fields other than data, CRLF line ends, data split over
// lines, events without data, and a stream cut off mid-event.
func TestEventReader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		want   []string
		err    error
	}{
		{"one event", "event: message\ndata: {\"a\":1}\n\n", []string{`{"a":1}`}, io.EOF},
		{"several events", "event: message\ndata: 1\n\nevent: message\ndata: 2\n\ndata: 3\n\n", []string{"1", "2", "3"}, io.EOF},
		{"comments and other fields", ": keep-alive\n\nid: 7\nretry: 100\nevent: message\n: a comment inside\ndata: x\n\n", []string{"x"}, io.EOF},
		{"CRLF", "event: message\r\ndata: {\"a\":1}\r\n\r\ndata: 2\r\n\r\n", []string{`{"a":1}`, "2"}, io.EOF},
		{"data over several lines", "data: {\"a\":\ndata: 1}\n\n", []string{"{\"a\":\n1}"}, io.EOF},
		{"no space after the colon", "data:x\n\n", []string{"x"}, io.EOF},
		{"only the first space is dropped", "data:  x\n\n", []string{" x"}, io.EOF},
		{"an event without data", "event: prime\nid: 0_0\n\ndata: y\n\n", []string{"y"}, io.EOF},
		{"blank lines between events", "\n\n\ndata: z\n\n\n", []string{"z"}, io.EOF},
		{"cut off mid-event", "data: 1\n\ndata: 2\n", []string{"1"}, io.EOF},
		{"empty stream", "", nil, io.EOF},
		{"a line over the limit", "data: 1\n\ndata: " + strings.Repeat("x", 64) + "\n\n", []string{"1"}, bufio.ErrTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(t, tc.stream, 32)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("ended with %v, want %v", err, tc.err)
			}
		})
	}
}

// TestWriteEvent: what the server writes is go-sdk's framing, and the
// reader gives back each message as written.
func TestWriteEvent(t *testing.T) {
	messages := []string{`{"jsonrpc":"2.0","method":"notifications/progress"}`, `{"jsonrpc":"2.0","id":1,"result":{}}`, `{}`}
	var b bytes.Buffer
	for _, m := range messages {
		if err := mcpwire.WriteEvent(&b, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if want := "event: message\ndata: " + messages[0] + "\n\n"; !strings.HasPrefix(b.String(), want) {
		t.Errorf("stream starts %q, want %q", b.String(), want)
	}
	got, err := readAll(t, b.String(), 1<<10)
	if diff := cmp.Diff(messages, got); diff != "" || err != io.EOF {
		t.Errorf("read back (-want +got):\n%s (ended with %v)", diff, err)
	}
}

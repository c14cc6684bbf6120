package mcpwire

import (
	"bufio"
	"bytes"
	"io"
)

// WriteEvent writes one JSON-RPC message as a server-sent event, framed as
// go-sdk's server frames it: "event: message", one data line, a blank
// line. data must hold no newline, which a compact JSON message never
// does.
func WriteEvent(w io.Writer, data []byte) error {
	b := make([]byte, 0, len("event: message\ndata: \n\n")+len(data))
	b = append(b, "event: message\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	_, err := w.Write(b)
	return err
}

// EventReader reads the data of server-sent events from a stream. It keeps
// only the data field: an MCP server sends each JSON-RPC message as one
// event's data, and event names, ids, retry fields and comments say
// nothing a call needs.
type EventReader struct {
	sc   *bufio.Scanner
	data bytes.Buffer
}

// NewEventReader reads events from r; a line longer than maxLine bytes ends
// the stream with bufio.ErrTooLong.
func NewEventReader(r io.Reader, maxLine int) *EventReader {
	sc := bufio.NewScanner(r)
	// Lines end at LF or CRLF (bufio.ScanLines drops the CR).
	// The scanner's limit is the larger of maxLine and the first buffer's
	// size, so the first buffer is no larger than maxLine.
	sc.Buffer(make([]byte, 0, min(16<<10, maxLine)), maxLine)
	return &EventReader{sc: sc}
}

// Next returns the data of the next event that has any: its data lines,
// each without "data:" and one following space, joined by newlines. The
// slice is valid until the next call. At the end of the stream it returns
// io.EOF, or the error that ended it; an event the stream ends in the
// middle of is dropped, as the event-stream format says.
func (e *EventReader) Next() ([]byte, error) {
	e.data.Reset()
	for e.sc.Scan() {
		line := e.sc.Bytes()
		if len(line) > 0 {
			if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				if e.data.Len() > 0 {
					e.data.WriteByte('\n')
				}
				e.data.Write(bytes.TrimPrefix(v, []byte(" ")))
			}
			continue
		}
		if e.data.Len() > 0 { // a blank line ends an event
			return e.data.Bytes(), nil
		}
	}
	if err := e.sc.Err(); err != nil {
		return nil, err
	}
	return nil, io.EOF
}

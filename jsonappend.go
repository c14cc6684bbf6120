package ladder

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// The appenders below write what encoding/json writes, byte for byte, for
// the documents a capability call carries its upstream's answer in: the
// stored call and the call's result. encoding/json checks and compacts
// every json.RawMessage it writes with its byte-at-a-time scanner, and an
// answer passes through it four times on its way from the upstream to the
// agent (BENCHMARKS.md, "Issue 22 (session 10)"); here a raw value that is
// already compact is checked once with jsonScan and copied.
// TestAppendJSONMatchesMarshal and the Fuzz targets hold them to
// encoding/json's bytes.

// AppendJSONString appends s as json.Marshal(s) writes it: quoted, with
// <, >, & and U+2028/U+2029 escaped and invalid UTF-8 replaced by U+FFFD.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if i += htmlPlainRun(s[i:]); i >= len(s) {
			break
		}
		// htmlPlainRun stopped here: an ASCII byte here needs its escape.
		if b := s[i]; b < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default: // the other control characters, and <, > and &
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(append(dst, s[start:i]...), `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(dst, s[start:]...), '"')
}

const hexDigits = "0123456789abcdef"

// jsonSafe reports whether encoding/json writes the ASCII byte b in a
// string as it is (its htmlSafeSet).
func jsonSafe(b byte) bool {
	return b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
}

// AppendCompactJSON appends the JSON value raw without insignificant space,
// as json.Compact does; with escapeHTML it also escapes <, >, & and
// U+2028/U+2029, as json.Marshal writes a json.RawMessage. A value not
// valid JSON is an error, as it is for them. A value already in that form
// (what ladder compacted before, and most of what an upstream sends) is
// checked once and copied; anything else is left to encoding/json.
func AppendCompactJSON(dst, raw []byte, escapeHTML bool) ([]byte, error) {
	s := jsonScan{in: raw}
	if end, ok := s.value(0, 0); ok && end == len(raw) && !s.spaced && (!escapeHTML || !htmlEscaped(raw)) {
		return append(dst, raw...), nil
	}
	if escapeHTML {
		b, err := json.Marshal(json.RawMessage(raw))
		if err != nil {
			return dst, err
		}
		return append(dst, b...), nil
	}
	buf := bytes.NewBuffer(dst) // json.Compact appends after dst
	if err := json.Compact(buf, raw); err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}

// htmlEscaped reports whether json.Marshal would escape anything in the
// valid JSON value raw: <, >, & or U+2028/U+2029, which valid JSON holds
// only inside strings. Each byte is looked for with bytes.IndexByte, which
// reads many bytes at a time.
func htmlEscaped(raw []byte) bool {
	if bytes.IndexByte(raw, '<') >= 0 || bytes.IndexByte(raw, '>') >= 0 || bytes.IndexByte(raw, '&') >= 0 {
		return true
	}
	for rest := raw; ; {
		i := bytes.IndexByte(rest, 0xE2) // the first byte of U+2028 and U+2029, and of others
		if i < 0 {
			return false
		}
		if rest = rest[i+1:]; len(rest) >= 2 && rest[0] == 0x80 && (rest[1] == 0xA8 || rest[1] == 0xA9) {
			return true
		}
	}
}

// jsonDoc appends one object's members in the order of its Go fields, as
// encoding/json writes them; err keeps the first failure.
type jsonDoc struct {
	b     []byte
	start int // where the object starts in b
	err   error
}

func newJSONDoc(dst []byte) jsonDoc { return jsonDoc{b: append(dst, '{'), start: len(dst)} }

func (d *jsonDoc) key(name string) {
	if len(d.b) > d.start+1 {
		d.b = append(d.b, ',')
	}
	d.b = append(append(append(d.b, '"'), name...), '"', ':')
}

func (d *jsonDoc) str(name, v string) {
	d.key(name)
	d.b = AppendJSONString(d.b, v)
}

// strOmit is str for a field tagged omitempty.
func (d *jsonDoc) strOmit(name, v string) {
	if v != "" {
		d.str(name, v)
	}
}

func (d *jsonDoc) intOmit(name string, v int64) {
	if v != 0 {
		d.key(name)
		d.b = strconv.AppendInt(d.b, v, 10)
	}
}

func (d *jsonDoc) int(name string, v int64) {
	d.key(name)
	d.b = strconv.AppendInt(d.b, v, 10)
}

func (d *jsonDoc) bool(name string, v bool) {
	d.key(name)
	d.b = strconv.AppendBool(d.b, v)
}

// float writes a float64 as encoding/json does: the shortest form that
// reads back the same, in exponent form below 1e-6 and from 1e21, whose
// exponent has no leading zero. NaN and the infinities are not JSON; the
// failure is encoding/json's own (done).
func (d *jsonDoc) float(name string, f float64) {
	d.key(name)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		if d.err == nil {
			d.err = errors.New("unsupported float value")
		}
		return
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	d.b = strconv.AppendFloat(d.b, f, format, -1, 64)
	if n := len(d.b); format == 'e' && n >= 4 && d.b[n-4] == 'e' && d.b[n-3] == '-' && d.b[n-2] == '0' {
		d.b[n-2] = d.b[n-1] // e-07 is written e-7
		d.b = d.b[:n-1]
	}
}

// raw writes a json.RawMessage field; a nil one is null, as encoding/json
// writes it.
func (d *jsonDoc) raw(name string, v json.RawMessage) {
	d.key(name)
	if v == nil {
		d.b = append(d.b, "null"...)
		return
	}
	var err error
	if d.b, err = AppendCompactJSON(d.b, v, true); err != nil && d.err == nil {
		d.err = err
	}
}

func (d *jsonDoc) rawOmit(name string, v json.RawMessage) {
	if len(v) > 0 {
		d.raw(name, v)
	}
}

func (d *jsonDoc) time(name string, t time.Time) {
	d.key(name)
	b, err := t.AppendText(append(d.b, '"'))
	if err != nil { // a year outside 0–9999; b is nil
		if d.err == nil {
			d.err = err
		}
		return
	}
	d.b = append(b, '"')
}

func (d *jsonDoc) timeOmit(name string, t *time.Time) {
	if t != nil {
		d.time(name, *t)
	}
}

// done closes the object, or reports false after a failure, when the
// caller appends marshal(v) instead. The two are apart so that v becomes
// an interface value, which copies it to the heap, only on a failure: a
// store writes these documents on every call.
func (d *jsonDoc) done() ([]byte, bool) {
	if d.err == nil {
		return append(d.b, '}'), true
	}
	return nil, false
}

// marshal is the object after a failure: json.Marshal(v)'s, so the error
// is encoding/json's own.
func (d *jsonDoc) marshal(v any) ([]byte, error) {
	m, err := json.Marshal(v)
	if err != nil {
		return d.b[:d.start], err
	}
	return append(d.b[:d.start], m...), nil
}

// AppendJSONStringMap appends m as json.Marshal(m) writes it: null for a
// nil map, else an object with its keys sorted and every string as
// AppendJSONString writes it.
func AppendJSONStringMap(dst []byte, m map[string]string) []byte {
	if m == nil {
		return append(dst, "null"...)
	}
	var small [4]string // a capability's few scope fields, sorted without an allocation
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(AppendJSONString(dst, k), ':')
		dst = AppendJSONString(dst, m[k])
	}
	return append(dst, '}')
}

// AppendJSON appends c as json.Marshal(c) writes it, which is how a store
// keeps a call.
func (c Call) AppendJSON(dst []byte) ([]byte, error) {
	d := newJSONDoc(slices.Grow(dst, c.jsonSize()))
	d.str("call_id", c.ID)
	d.str("workspace", c.Workspace)
	d.str("capability", c.Capability)
	d.str("key_id", c.KeyID)
	d.strOmit("idempotency_key", c.IdempotencyKey)
	d.str("status", string(c.Status))
	d.raw("payload", c.Payload)
	if len(c.Scope) > 0 {
		d.key("scope")
		d.b = AppendJSONStringMap(d.b, c.Scope)
	}
	d.strOmit("route_id", c.RouteID)
	d.strOmit("gate_decision_id", c.GateDecisionID)
	d.strOmit("evidence_sha256", c.EvidenceSHA256)
	d.strOmit("approval_id", c.ApprovalID)
	d.intOmit("audit_seq", c.AuditSeq)
	d.rawOmit("result", c.Result)
	d.strOmit("error", c.Error)
	d.strOmit("error_code", string(c.ErrorCode))
	d.intOmit("upstream_status", int64(c.UpstreamStatus))
	d.time("started_at", c.StartedAt)
	d.timeOmit("finished_at", c.FinishedAt)
	if b, ok := d.done(); ok {
		return b, nil
	}
	return d.marshal(c)
}

// jsonSize is about the length of c's JSON when nothing in it needs
// escaping: room made once, where growing from nothing copied the document
// at each doubling (a call is written twice, begun and finished).
func (c Call) jsonSize() int {
	// The member names and punctuation (~300 bytes), the two times and
	// the two numbers at their longest.
	n := 448 + len(c.Status) + len(c.ErrorCode) + len(c.ID) + len(c.Workspace) + len(c.Capability) + len(c.KeyID) + len(c.IdempotencyKey) + len(c.Payload) +
		len(c.RouteID) + len(c.GateDecisionID) + len(c.EvidenceSHA256) + len(c.ApprovalID) + len(c.Result) + len(c.Error)
	for k, v := range c.Scope {
		n += len(k) + len(v) + 6
	}
	return n
}

// AppendJSON appends r as json.Marshal(r) writes it: the structured
// content of every capability call's answer.
func (r CallResult) AppendJSON(dst []byte) ([]byte, error) {
	d := newJSONDoc(dst)
	d.str("status", r.Status)
	d.str("capability", r.Capability)
	d.str("message", r.Message)
	d.rawOmit("result", r.Result)
	d.strOmit("call_id", r.CallID)
	d.strOmit("approval_id", r.ApprovalID)
	d.timeOmit("expires_at", r.ExpiresAt)
	d.strOmit("route_id", r.RouteID)
	d.strOmit("decision", r.Decision)
	d.strOmit("lane", r.Lane)
	d.strOmit("gate_decision_id", r.GateDecisionID)
	d.intOmit("audit_seq", r.AuditSeq)
	if r.Replayed {
		d.bool("replayed", true)
	}
	d.rawOmit("proposal", r.Proposal)
	if b, ok := d.done(); ok {
		return b, nil
	}
	return d.marshal(r)
}

// AppendJSON appends r as json.Marshal(r) writes it: the structured
// content of every route_item answer.
func (r Route) AppendJSON(dst []byte) ([]byte, error) {
	d := newJSONDoc(dst)
	d.str("route_id", r.ID)
	d.str("workspace", r.Workspace)
	d.str("queue", r.Queue)
	d.str("step", r.Step)
	d.str("item", r.Item)
	d.str("decision", string(r.Decision))
	d.str("lane", string(r.Lane))
	d.bool("audit", r.Audit)
	d.float("audit_rate", r.AuditRate)
	d.str("reason", r.Reason)
	d.rawOmit("features", r.Features)
	d.time("at", r.At)
	d.int("lane_epoch", int64(r.LaneEpoch))
	if b, ok := d.done(); ok {
		return b, nil
	}
	return d.marshal(r)
}

// routeAuditData is the data of a route's audit record, the reference
// AuditData writes by hand. Its fields are in the order of their keys, as
// canonical JSON has them, so its encoding is already canonical.
type routeAuditData struct {
	Audit     bool            `json:"audit"`
	AuditRate float64         `json:"audit_rate"`
	Decision  Decision        `json:"decision"`
	Features  json.RawMessage `json:"features"`
	Item      string          `json:"item"`
	Lane      Lane            `json:"lane"`
	LaneEpoch int             `json:"lane_epoch"`
	Queue     string          `json:"queue"`
	Step      string          `json:"step"`
}

// AuditData is the data of r's audit record (kind AuditRoute): what was
// decided, for which item of which step, in which lane and epoch, at
// which audit rate, from which features; the stores read the record's
// queue and step from it. Written as json.Marshal writes routeAuditData,
// byte for byte, without its reflection (TestRouteAuditDataMatchesMarshal).
func (r Route) AuditData() (json.RawMessage, error) {
	d := newJSONDoc(make([]byte, 0, 160+len(r.Item)+len(r.Queue)+len(r.Step)+len(r.Features)))
	d.bool("audit", r.Audit)
	d.float("audit_rate", r.AuditRate)
	d.str("decision", string(r.Decision))
	d.raw("features", r.Features)
	d.str("item", r.Item)
	d.str("lane", string(r.Lane))
	d.int("lane_epoch", int64(r.LaneEpoch))
	d.str("queue", r.Queue)
	d.str("step", r.Step)
	if b, ok := d.done(); ok {
		return b, nil
	}
	return d.marshal(r.auditData())
}

func (r Route) auditData() routeAuditData {
	return routeAuditData{Audit: r.Audit, AuditRate: r.AuditRate, Decision: r.Decision, Features: r.Features, Item: r.Item,
		Lane: r.Lane, LaneEpoch: r.LaneEpoch, Queue: r.Queue, Step: r.Step}
}

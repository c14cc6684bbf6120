package ladder

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Audit record kinds.
const (
	AuditKeyCreate    = "key.create"
	AuditKeyRevoke    = "key.revoke"
	AuditRoute        = "route"
	AuditReview       = "review"
	AuditLaneChange   = "lane.change"
	AuditPin          = "lane.pin"
	AuditUnpin        = "lane.unpin"
	AuditOutcome      = "outcome"
	AuditGateDecision = "gate.decision"
	AuditCall         = "capability.call"
	AuditCallResult   = "capability.result"
	AuditApproval     = "approval"
	AuditServerStart  = "server.start"
	// AuditOutage records, once durable writes work again, that they
	// failed for a while on one replica (and calls were refused).
	AuditOutage = "audit.unavailable"
	// AuditToolDefinitions holds, per workspace and per start, the hash of
	// every capability definition the config declared.
	AuditToolDefinitions = "tool.definitions"
	// AuditToolDefinitionChanged records a capability whose definition
	// differs from the one the previous start recorded.
	AuditToolDefinitionChanged = "tool.definition.changed"
)

// AuditEntry is what a caller asks the audit log to record. The store adds
// the sequence number and the hash chain.
type AuditEntry struct {
	Workspace string          `json:"workspace"`
	Actor     string          `json:"actor"`   // key id, or "system"
	Kind      string          `json:"kind"`    // one of the Audit* kinds
	Subject   string          `json:"subject"` // id of the object the record is about
	At        time.Time       `json:"at"`
	Data      json.RawMessage `json:"data"` // canonical JSON
	// Event, when set, is the event the change reports: the store writes
	// it to the outbox in the same transaction as the entry (DESIGN.md
	// §8a), so an event exists exactly when its change committed. It is
	// not part of the record or its hash.
	Event *Event `json:"-"`
}

// NewAuditEntry builds an entry whose time is truncated to microseconds and
// whose data is canonical JSON, so that both backends store and re-hash it
// byte for byte.
func NewAuditEntry(workspace, actor, kind, subject string, at time.Time, data any) (AuditEntry, error) {
	raw, err := CanonicalJSON(data)
	if err != nil {
		return AuditEntry{}, fmt.Errorf("audit data: %w", err)
	}
	return AuditEntry{Workspace: workspace, Actor: actor, Kind: kind, Subject: subject, At: at.UTC().Truncate(time.Microsecond), Data: raw}, nil
}

// AuditRecord is one stored, hash-chained record of the audit log.
type AuditRecord struct {
	Seq int64 `json:"seq"`
	AuditEntry
	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash"`
}

// CanonicalJSON encodes v as JSON with object keys sorted and no
// insignificant space. Numbers keep their literal form.
func CanonicalJSON(v any) (json.RawMessage, error) {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		raw = b
	}
	out, _, err := canonicalBytes(raw, nil)
	return out, err
}

// canonicalBytes is CanonicalJSON of raw JSON. With st set, the fast path
// notes the top-level queue and step into st as it goes, and noted says
// it did (the reference path and empty input note nothing).
func canonicalBytes(raw []byte, st *auditStep) (out json.RawMessage, noted bool, err error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("null"), false, nil
	}
	if out, ok := canonicalRun(canonicalizer{jsonScan: jsonScan{in: raw}, out: make([]byte, 0, len(raw)), step: st}); ok {
		return out, true, nil
	}
	out, err = canonicalReference(raw)
	return out, false, err
}

// CanonicalAuditData is CanonicalJSON(data) and AuditStepOf of the
// result, which a store needs of every record it appends: for the common
// record, the step is noted while the data is canonicalised rather than
// read in a second scan. FuzzCanonicalAuditData holds it to the two.
func CanonicalAuditData(data json.RawMessage) (canon json.RawMessage, queue, step string, err error) {
	var st auditStep
	canon, noted, err := canonicalBytes(data, &st)
	if err != nil {
		return nil, "", "", err
	}
	if noted {
		return canon, st.queue, st.step, nil
	}
	queue, step = AuditStepOf(canon)
	return canon, queue, step, nil
}

// canonicalReference is CanonicalJSON by decoding raw into Go values and
// encoding them again, for what canonicalFast does not handle.
func canonicalReference(raw []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	// encoding/json sorts map keys; HTML escaping is off so the bytes are
	// what other tools would produce.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(generic); err != nil {
		return nil, err
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

// canonicalRecord is the hashed form of a record: every field but the hashes.
type canonicalRecord struct {
	Actor     string          `json:"actor"`
	At        string          `json:"at"`
	Data      json.RawMessage `json:"data"`
	Kind      string          `json:"kind"`
	Seq       int64           `json:"seq"`
	Subject   string          `json:"subject"`
	Workspace string          `json:"workspace"`
}

// Canonical returns the bytes the hash covers.
func (r AuditRecord) Canonical() []byte { return r.AppendCanonical(nil) }

// AppendCanonical appends Canonical's bytes to dst and returns the
// extended slice: the chain hash and the log's leaf hash are taken over
// them once per record, and a caller hashing many records reuses one
// buffer instead of making a record's worth of garbage for each.
func (r AuditRecord) AppendCanonical(dst []byte) []byte {
	data := r.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	if b, ok := r.appendCanonicalFast(dst, data); ok {
		return b
	}
	return append(dst, r.canonicalReference(data)...)
}

// canonicalReference is Canonical through encoding/json.
func (r AuditRecord) canonicalReference(data json.RawMessage) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(canonicalRecord{
		Actor: r.Actor, At: r.At.UTC().Format(time.RFC3339Nano), Data: data,
		Kind: r.Kind, Seq: r.Seq, Subject: r.Subject, Workspace: r.Workspace,
	})
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// appendCanonicalFast appends Canonical's bytes to dst by hand when every
// string field is plain ASCII that encoding/json writes as it is and data
// is already canonical (so its compaction by the encoder changes nothing),
// as a stored record's is; it reports false otherwise (and what it wrote
// past len(dst) is then garbage). TestCanonicalRecordFastPath compares the
// two.
func (r AuditRecord) appendCanonicalFast(dst []byte, data json.RawMessage) ([]byte, bool) {
	var at [len(time.RFC3339Nano) + 8]byte
	atText := r.At.UTC().AppendFormat(at[:0], time.RFC3339Nano)
	for _, s := range [...]string{r.Actor, r.Kind, r.Subject, r.Workspace} {
		if !plainJSONString(s) {
			return nil, false
		}
	}
	b := slices.Grow(dst, 96+len(data)+len(r.Actor)+len(r.Kind)+len(r.Subject)+len(r.Workspace))
	var ok bool
	b = append(b, `{"actor":"`...)
	b = append(b, r.Actor...)
	b = append(b, `","at":"`...)
	b = append(b, atText...)
	b = append(b, `","data":`...)
	if b, ok = canonicalFast(b, data); !ok || !bytes.Equal(b[len(b)-len(data):], data) {
		return nil, false
	}
	b = append(b, `,"kind":"`...)
	b = append(b, r.Kind...)
	b = append(b, `","seq":`...)
	b = strconv.AppendInt(b, r.Seq, 10)
	b = append(b, `,"subject":"`...)
	b = append(b, r.Subject...)
	b = append(b, `","workspace":"`...)
	b = append(b, r.Workspace...)
	b = append(b, `"}`...)
	return b, true
}

// plainJSONString reports whether encoding/json writes s between quotes
// unchanged: printable ASCII without a quote or backslash.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// ChainHash returns hex(SHA-256(prev_hash ‖ canonical record)).
func ChainHash(prevHash string, r AuditRecord) string {
	// Every record appended and every record verified is hashed here: the
	// input is gathered in a pooled buffer and hashed in one call, so the
	// hex string is the only allocation.
	bp := hashInputs.Get().(*[]byte)
	b := r.AppendCanonical(append((*bp)[:0], prevHash...))
	sum := sum256(b)
	putHashInput(bp, b)
	return hexHash(sum)
}

// LeafHash returns r's leaf hash in its workspace's transparency log:
// RFC 6962's SHA-256(0x00 ‖ canonical record), golang.org/x/mod/sumdb/tlog's
// RecordHash of Canonical (package translog tests that they agree).
func (r AuditRecord) LeafHash() [32]byte {
	bp := hashInputs.Get().(*[]byte)
	b := r.AppendCanonical(append((*bp)[:0], 0x00))
	sum := sum256(b)
	putHashInput(bp, b)
	return sum
}

// hashInputs holds the buffers records are hashed in.
var hashInputs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// putHashInput returns b, grown from *bp, to hashInputs.
func putHashInput(bp *[]byte, b []byte) {
	if cap(b) <= maxPooledHashInput {
		*bp = b[:0]
		hashInputs.Put(bp)
	}
}

// maxPooledHashInput is the largest buffer ChainHash keeps: a rare large
// record's buffer is left to the collector rather than held by the pool.
const maxPooledHashInput = 64 << 10

// sum256 is sha256.Sum256 through a pooled digest. Built with
// cmd/ladder's profile (default.pgo), sha256.Sum256 allocates its digest
// and its result, 160 B in two allocations a hash: the compiler
// devirtualizes its h.Sum call only behind a type check, so both escape.
// Every governed call takes several here (its key's hash, and each audit
// record's chain and leaf hashes). TestSum256 holds it to sha256.Sum256.
func sum256(b []byte) [sha256.Size]byte {
	d := digests.Get().(*digest)
	d.h.Reset()
	d.h.Write(b)
	sum := [sha256.Size]byte(d.h.Sum(d.out[:0]))
	digests.Put(d)
	return sum
}

// digest is a pooled SHA-256 state with room for its sum, so taking the
// sum allocates nothing.
type digest struct {
	h   hash.Hash
	out [sha256.Size]byte
}

var digests = sync.Pool{New: func() any { return &digest{h: sha256.New()} }}

// hexHash is sum in lower-case hex, as records store their hashes.
func hexHash(sum [sha256.Size]byte) string {
	var hx [2 * sha256.Size]byte
	hex.Encode(hx[:], sum[:])
	return string(hx[:])
}

// Seal sets r's PrevHash and Hash given the previous record's hash. Stores
// call it inside the transaction that appends r, so the chain is serialized
// wherever the append is.
func (r *AuditRecord) Seal(prevHash string) {
	r.PrevHash = prevHash
	r.Hash = ChainHash(prevHash, *r)
}

// SealLeaf is Seal that also returns r's LeafHash, for a store that hands
// its appends' leaves to the integrator (TlogStore.TlogFed): both hashes
// are taken over one encoding of r.
func (r *AuditRecord) SealLeaf(prevHash string) (leaf [32]byte) {
	// The buffer is a spare byte, prevHash, then the canonical record. The
	// chain hash is over all but the spare byte; then the byte just before
	// the record (the spare one when prevHash is empty) becomes the leaf's
	// 0x00 prefix, and the leaf hash is over it and the record.
	bp := hashInputs.Get().(*[]byte)
	b := append(append((*bp)[:0], 0), prevHash...)
	rec := len(b)
	b = r.AppendCanonical(b)
	chain := sum256(b[1:])
	b[rec-1] = 0x00
	leaf = sum256(b[rec-1:])
	putHashInput(bp, b)
	r.PrevHash, r.Hash = prevHash, hexHash(chain)
	return leaf
}

// ChainVerifier walks an audit log in sequence order and names the first
// record that breaks a chain. Records up to GlobalThrough (written before
// each workspace had its own chain, migration 0014) form one chain in seq
// order, from seq 1 with no gap; each later record chains to the previous
// record of its workspace (to its workspace's last record up to
// GlobalThrough when it is the first after it), and seqs only grow: they
// may skip numbers, as a rolled-back append takes one and commits nothing.
type ChainVerifier struct {
	// GlobalThrough is the last seq of the global chain (TlogMeta.ChainSeq).
	GlobalThrough int64

	prev    string // hash of the last record, in seq order
	lastSeq int64
	count   int64
	heads   map[string]string // workspace → hash of its last record
}

// Check verifies the next record.
func (v *ChainVerifier) Check(r AuditRecord) error {
	want := v.prev
	switch {
	case r.Seq <= v.GlobalThrough:
		if r.Seq != v.lastSeq+1 {
			return fmt.Errorf("audit record %d: expected seq %d (a record is missing or out of order)", r.Seq, v.lastSeq+1)
		}
		if r.PrevHash != want {
			return fmt.Errorf("audit record %d: prev_hash %.12s… does not match the hash of record %d (%.12s…)", r.Seq, r.PrevHash, r.Seq-1, want)
		}
	case v.lastSeq < v.GlobalThrough:
		return fmt.Errorf("audit record %d: expected seq %d (a record of the global chain, which ends at %d, is missing)", r.Seq, v.lastSeq+1, v.GlobalThrough)
	default:
		if r.Seq <= v.lastSeq {
			return fmt.Errorf("audit record %d: follows record %d (records are out of order)", r.Seq, v.lastSeq)
		}
		want = v.heads[r.Workspace]
		if r.PrevHash != want {
			if want == "" {
				return fmt.Errorf("audit record %d: prev_hash %.12s… but it is the first record of workspace %s (a record of it is missing, or it was altered)", r.Seq, r.PrevHash, r.Workspace)
			}
			return fmt.Errorf("audit record %d: prev_hash %.12s… does not match the hash of workspace %s's previous record (%.12s…): a record is missing or out of order", r.Seq, r.PrevHash, r.Workspace, want)
		}
	}
	if h := ChainHash(r.PrevHash, r); r.Hash != h {
		return fmt.Errorf("audit record %d: hash %.12s… does not match its contents (want %.12s…): the record was altered", r.Seq, r.Hash, h)
	}
	if v.heads == nil {
		v.heads = map[string]string{}
	}
	v.heads[r.Workspace] = r.Hash
	v.prev, v.lastSeq = r.Hash, r.Seq
	v.count++
	return nil
}

// End checks, once every record was checked, that none of the global
// chain is missing from its end.
func (v *ChainVerifier) End() error {
	if v.lastSeq < v.GlobalThrough {
		return fmt.Errorf("audit record %d: missing; the global chain ends at %d (records were deleted from its end)", v.lastSeq+1, v.GlobalThrough)
	}
	return nil
}

// Count returns how many records verified.
func (v *ChainVerifier) Count() int64 { return v.count }

// LastHash returns the hash of the last verified record.
func (v *ChainVerifier) LastHash() string { return v.prev }

// LastSeq returns the seq of the last verified record.
func (v *ChainVerifier) LastSeq() int64 { return v.lastSeq }

// Heads returns each workspace's last verified record's hash.
func (v *ChainVerifier) Heads() map[string]string { return v.heads }

// ChainStore is what verifying the chains reads: the records, and where
// the global chain ends.
type ChainStore interface {
	AuditStore
	TlogMeta(ctx context.Context) (TlogMeta, error)
}

// VerifyAudit walks the whole audit log of s and returns how many records
// verified, or an error naming the first record that breaks a chain.
func VerifyAudit(ctx context.Context, s ChainStore) (int64, error) {
	m, err := s.TlogMeta(ctx)
	if err != nil {
		return 0, err
	}
	v := ChainVerifier{GlobalThrough: m.ChainSeq}
	if err = s.WalkAudit(ctx, 0, v.Check); err == nil {
		err = v.End()
	}
	return v.Count(), err
}

// AuditStepOf returns the queue and step a record's data names in its
// top-level "queue" and "step" string fields (routes, reviews, outcomes,
// lane changes and pins carry them), with "" for a field that is absent or
// not a string. Stores keep the two beside the record so the audit trail
// can be filtered by step; they are read from the hashed data, so they
// need no place in the hash. Keys match as encoding/json matches them (an
// exact match first, else one differing in case); every record ladder
// writes spells them "queue" and "step", as migration 0011's backfill
// reads them.
func AuditStepOf(data json.RawMessage) (queue, step string) {
	// Data that is not an object (null, a list) names no step. A field
	// that is not a string stays "": Unmarshal skips it and reports an
	// UnmarshalTypeError, which is no failure here. The common record
	// takes the fast path (auditStepFast); the rest decode into two
	// strings.
	if len(data) == 0 || data[0] != '{' {
		return "", ""
	}
	if q, s, ok := auditStepFast(data); ok {
		return q, s
	}
	return auditStepReference(data)
}

// auditStepReference is AuditStepOf by encoding/json.
func auditStepReference(data json.RawMessage) (queue, step string) {
	var v struct {
		Queue string `json:"queue"`
		Step  string `json:"step"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			return "", ""
		}
	}
	return v.Queue, v.Step
}

// Audit export formats (GET /v1/audit/export?format=, ladder audit export
// --format).
const (
	// AuditFormatJSONL is one AuditRecord per line, exactly as stored, so a
	// verifier can recompute every hash.
	AuditFormatJSONL = "jsonl"
	// AuditFormatCSV is a header row and one row per record (AuditCSVHeader).
	AuditFormatCSV = "csv"
	// AuditFormatLog is the workspace's transparency log: its records with
	// their leaves and the latest signed checkpoint (translog's bundle),
	// verified offline by `ladder audit verify-export`. It comes from a
	// server, not from an AuditEncoder.
	AuditFormatLog = "log"
)

// AuditCSVHeader returns the header row of a CSV export. step is
// queue/step as the record's data names it (AuditStepOf); payload is the
// record's data, the canonical JSON the hash covers.
func AuditCSVHeader() []string {
	return []string{"seq", "at", "workspace", "kind", "actor", "subject", "step", "hash", "prev_hash", "payload"}
}

// AuditEncoder writes audit records in an export format.
type AuditEncoder struct {
	format string
	json   *json.Encoder
	csv    *csv.Writer
	header bool
}

// NewAuditEncoder returns an encoder of format (AuditFormatJSONL or
// AuditFormatCSV) writing to w; an unknown format is refused naming the
// field "format".
func NewAuditEncoder(w io.Writer, format string) (*AuditEncoder, error) {
	e := &AuditEncoder{format: format}
	switch format {
	case AuditFormatJSONL:
		e.json = json.NewEncoder(w)
		e.json.SetEscapeHTML(false)
	case AuditFormatCSV:
		e.csv = csv.NewWriter(w)
	default:
		return nil, InvalidField("format", fmt.Sprintf("The format %q is not one of jsonl, csv, log.", format), "send format=jsonl (one record per line), format=csv, or format=log (the workspace's transparency log with its signed checkpoint)")
	}
	return e, nil
}

// ContentType is the media type of the encoder's format.
func (e *AuditEncoder) ContentType() string {
	if e.format == AuditFormatCSV {
		return "text/csv; charset=utf-8"
	}
	return "application/x-ndjson"
}

// Begin writes what precedes the records: the CSV header row. Encode calls
// it when it has not been called, so an empty CSV export still has it.
func (e *AuditEncoder) Begin() error {
	if e.csv == nil || e.header {
		return nil
	}
	e.header = true
	return e.csv.Write(AuditCSVHeader())
}

// Encode writes one record.
func (e *AuditEncoder) Encode(r AuditRecord) error {
	if e.json != nil {
		return e.json.Encode(r)
	}
	if err := e.Begin(); err != nil {
		return err
	}
	step := ""
	if q, s := AuditStepOf(r.Data); s != "" {
		step = s
		if q != "" {
			step = q + "/" + s
		}
	}
	data := r.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	return e.csv.Write([]string{strconv.FormatInt(r.Seq, 10), r.At.UTC().Format(time.RFC3339Nano), r.Workspace, r.Kind, r.Actor, r.Subject,
		step, r.Hash, r.PrevHash, string(data)})
}

// Flush writes out what a CSV writer buffers and returns its error; JSON
// lines are written as they are encoded.
func (e *AuditEncoder) Flush() error {
	if e.csv == nil {
		return nil
	}
	e.csv.Flush()
	return e.csv.Error()
}

package translog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/ladderhq/ladder"
)

// BundleFormat names the export format that carries a workspace's log: JSON
// lines, a header (BundleHeader) and then one BundleLeaf per leaf, in leaf
// order, exactly as many as the checkpoint's tree size.
const BundleFormat = "ladder-audit-log/1"

// BundleHeader is the first line of a log export.
type BundleHeader struct {
	Format    string `json:"format"`
	Workspace string `json:"workspace"`
	// Checkpoint is the signed note of the tree the export holds.
	Checkpoint string `json:"checkpoint"`
}

// BundleLeaf is one record of a log export with its leaf index and the
// leaf hash the server's tree holds for it. The leaf hash is not trusted:
// the verifier recomputes every one, and a difference names the record.
type BundleLeaf struct {
	Leaf     int64              `json:"leaf"`
	LeafHash tlog.Hash          `json:"leaf_hash"`
	Record   ladder.AuditRecord `json:"record"`
}

// BundleWriter writes a log export.
type BundleWriter struct{ enc *json.Encoder }

// NewBundleWriter returns a writer to w. Records are written with HTML
// escaping off, so their data keeps the bytes its hash covers.
func NewBundleWriter(w io.Writer) *BundleWriter {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &BundleWriter{enc: enc}
}

// Header writes the header line.
func (b *BundleWriter) Header(workspace, checkpoint string) error {
	return b.enc.Encode(BundleHeader{Format: BundleFormat, Workspace: workspace, Checkpoint: checkpoint})
}

// Leaf writes one leaf line.
func (b *BundleWriter) Leaf(leaf int64, rec ladder.AuditRecord) error {
	return b.enc.Encode(BundleLeaf{Leaf: leaf, LeafHash: LeafHash(rec), Record: rec})
}

// VerifyResult is what an export that verifies proves.
type VerifyResult struct {
	Workspace  string
	Checkpoint Checkpoint
	Records    int64
}

// VerifyBundle verifies a log export offline with the checkpoint public
// key vkey: the checkpoint's signature, every record's hash against its
// contents, the records' order and count, and the tree they form against
// the signed root. The first failure is returned naming what and where (a
// record by seq and leaf).
func VerifyBundle(r io.Reader, vkey string) (VerifyResult, error) {
	dec := json.NewDecoder(r)
	var h BundleHeader
	if err := dec.Decode(&h); err != nil {
		return VerifyResult{}, fmt.Errorf("export header: %w", err)
	}
	if h.Format != BundleFormat {
		return VerifyResult{}, fmt.Errorf("export header: format %q is not %s (export with `ladder audit export --log`)", h.Format, BundleFormat)
	}
	cp, err := Open(h.Checkpoint, vkey)
	if err != nil {
		return VerifyResult{}, err
	}
	if want := "/audit/" + h.Workspace; !strings.HasSuffix(cp.Origin, want) {
		return VerifyResult{}, fmt.Errorf("checkpoint origin %q is not the log of workspace %s", cp.Origin, h.Workspace)
	}
	res := VerifyResult{Workspace: h.Workspace, Checkpoint: cp}
	var (
		mem     MemoryReader
		prevSeq int64
	)
	next := func(i int64) (BundleLeaf, error) {
		var l BundleLeaf
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			return l, err
		} else if err != nil {
			return l, fmt.Errorf("export line %d (leaf %d): %w", i+2, i, err)
		}
		return l, nil
	}
	for i := int64(0); ; i++ {
		l, err := next(i)
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return res, err
		}
		rec := l.Record
		where := fmt.Sprintf("record %d (leaf %d)", rec.Seq, l.Leaf)
		if l.Leaf > i {
			// The next leaf tells a reordered pair from a deleted record;
			// either way the verdict is given here.
			n, err := next(i + 1)
			if err == nil && n.Leaf == i {
				return res, fmt.Errorf("%s is out of place, before record %d (leaf %d): a reordered pair", where, n.Record.Seq, n.Leaf)
			}
		}
		switch {
		case l.Leaf > i:
			return res, fmt.Errorf("leaf %d is missing: leaf %d (record %d) follows leaf %d (record %d): a record was deleted", i, l.Leaf, rec.Seq, i-1, prevSeq)
		case l.Leaf < i:
			return res, fmt.Errorf("%s is out of place at position %d: records were reordered or repeated", where, i)
		case i >= cp.Tree.N:
			return res, fmt.Errorf("%s is beyond the checkpoint's %d leaves: records were added", where, cp.Tree.N)
		case rec.Workspace != h.Workspace:
			return res, fmt.Errorf("%s belongs to workspace %q, not %s", where, rec.Workspace, h.Workspace)
		case i > 0 && rec.Seq <= prevSeq:
			return res, fmt.Errorf("%s follows record %d at leaf %d: records are out of order (a reordered pair)", where, prevSeq, i-1)
		}
		if want := ladder.ChainHash(rec.PrevHash, rec); rec.Hash != want {
			return res, fmt.Errorf("%s: its hash does not match its contents: the record was altered", where)
		}
		if lh := LeafHash(rec); lh != l.LeafHash {
			return res, fmt.Errorf("%s: its contents do not match the leaf hash the log holds: the record was altered", where)
		}
		if err := mem.Add(LeafData(rec)); err != nil {
			return res, fmt.Errorf("%s: %w", where, err)
		}
		prevSeq = rec.Seq
		res.Records++
	}
	if res.Records < cp.Tree.N {
		return res, fmt.Errorf("the export ends after leaf %d (record %d) but the checkpoint covers %d leaves: records were deleted", res.Records-1, prevSeq, cp.Tree.N)
	}
	root, err := tlog.TreeHash(cp.Tree.N, &mem)
	if err != nil {
		return res, fmt.Errorf("tree hash: %w", err)
	}
	if root != cp.Tree.Hash {
		return res, fmt.Errorf("the %d records hash to root %s, not the checkpoint's signed root %s: a record and its leaf hash were altered", cp.Tree.N, root, cp.Tree.Hash)
	}
	return res, nil
}

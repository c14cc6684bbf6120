package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/translog"
)

// CheckpointKey returns the checkpoint public key (a signed-note verifier
// key), or "" when the server signs no checkpoints.
func (s *Service) CheckpointKey() string {
	if s.checkpoints == nil {
		return ""
	}
	return s.checkpoints.PublicKey()
}

// IntegrateLogs adds every committed audit record that is not yet a leaf
// to its workspace's log and signs each grown log's checkpoint. serve runs
// it every few seconds; proofs and checkpoints run it for their workspace
// first. On a database whose records predate the logs it first verifies
// the whole hash chain (see adopt).
func (s *Service) IntegrateLogs(ctx context.Context) error {
	if _, err := s.adopt(ctx); err != nil {
		return err
	}
	// A workspace's chain head is ahead of its tree exactly when it has
	// records that are no leaves yet: no seq watermark, which records of
	// different workspaces committing out of seq order would pass by.
	wss, err := s.store.TlogWorkspaces(ctx, true)
	if err != nil {
		return err
	}
	for _, ws := range wss {
		if _, err := s.integrate(ctx, ws); err != nil {
			return err
		}
	}
	return nil
}

// adopt makes the records written before the logs existed (migration
// 0012) their first leaves, once, and likewise the records written before
// each workspace had its own chain (migration 0014, which adopts again):
// the chains are verified first, and each workspace with records gets an
// AuditTlogStart record saying how far they verified and where the global
// chain ended. A broken chain is never adopted: the logs stay off and the
// error names the first bad record.
//
// The walk reads every record, so one runs at a time in this process, and a
// broken chain's verdict is kept for adoptRetry: requests for checkpoints
// cannot make the server walk a long chain over and over.
func (s *Service) adopt(ctx context.Context) (ladder.TlogMeta, error) {
	meta, err := s.store.TlogMeta(ctx)
	if err != nil || meta.Adopted {
		return meta, err
	}
	s.adoption.mu.Lock()
	defer s.adoption.mu.Unlock()
	if meta, err = s.store.TlogMeta(ctx); err != nil || meta.Adopted {
		return meta, err
	}
	if s.adoption.err != nil && s.now().Sub(s.adoption.at) < adoptRetry {
		return meta, s.adoption.err
	}
	res, err := AuditReader{Store: s.store}.Verify(ctx)
	if err != nil {
		return meta, err
	}
	if !res.Intact {
		s.adoption.at = s.now()
		s.adoption.err = &ladder.Error{Code: ladder.CodeAuditUnavailable,
			Message: fmt.Sprintf("The audit chain is broken at record %d, so the transparency logs were not started over it: %s.", *res.FirstBadSeq, res.Reason),
			Hint:    "run `ladder audit verify` and restore the database from a backup taken before the record was altered"}
		return meta, s.adoption.err
	}
	s.adoption.err = nil
	won, err := s.store.TlogAdopt(ctx)
	if err != nil || !won {
		meta.Adopted = err == nil
		return meta, err
	}
	wss, err := s.store.TlogWorkspaces(ctx, false)
	if err == nil {
		entries := make([]ladder.AuditEntry, 0, len(wss))
		for _, ws := range wss {
			e, eerr := ladder.NewAuditEntry(ws, "system", ladder.AuditTlogStart, "", s.now(), map[string]any{
				"chain_verified_records": res.Verified, "chain_head": res.LastHash, "legacy_through_seq": meta.LegacySeq,
				"global_chain_through_seq": meta.ChainSeq,
			})
			if eerr != nil {
				err = eerr
				break
			}
			entries = append(entries, e)
		}
		if err == nil {
			_, err = s.store.AppendAudit(ctx, entries...)
		}
	}
	if err != nil {
		if uerr := s.store.TlogUnadopt(ctx); uerr != nil {
			s.log.ErrorContext(ctx, "transparency logs: undo adoption", "err", uerr)
		}
		return meta, fmt.Errorf("record the logs' start: %w", err)
	}
	s.log.InfoContext(ctx, "transparency logs started: the existing audit chain verified", "records", res.Verified, "last_hash", res.LastHash)
	meta.Adopted = true
	return meta, nil
}

// integrate brings ws's log up to date and signs its checkpoint when it
// grew, returning the latest checkpoint (zero when unsigned or empty).
func (s *Service) integrate(ctx context.Context, ws string) (ladder.TlogCheckpoint, error) {
	size, err := translog.IntegrateAll(ctx, s.store, ws)
	if err != nil || s.checkpoints == nil || size == 0 {
		return ladder.TlogCheckpoint{}, err
	}
	latest, err := s.store.LatestCheckpoint(ctx, ws)
	if err == nil && latest.Size >= size {
		return latest, nil
	}
	if err != nil && !errors.Is(err, ladder.ErrNotFound) {
		return latest, err
	}
	root, err := tlog.TreeHash(size, translog.Reader(ctx, s.store, ws))
	if err != nil {
		return ladder.TlogCheckpoint{}, fmt.Errorf("tree hash of %s: %w", ws, err)
	}
	at := ladder.NormTime(s.now())
	note, err := s.checkpoints.Sign(ws, tlog.Tree{N: size, Hash: root}, at)
	if err != nil {
		return ladder.TlogCheckpoint{}, err
	}
	return s.store.SaveCheckpoint(ctx, ladder.TlogCheckpoint{Workspace: ws, Size: size, Root: root, Note: note, At: at})
}

// adoptRetry is how long a broken legacy chain's verdict stands before the
// chain is walked again.
const adoptRetry = time.Minute

// adoption serializes adopt in one process and keeps its last failure.
type adoption struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

// logWorkspace is the one log p may read: its key's workspace. An admin
// key of every workspace has no one log.
func logWorkspace(p ladder.Principal) (string, error) {
	if p.Workspace == AllWorkspaces {
		return "", ladder.InvalidField("workspace", "An admin key of every workspace has no one audit log.", "use a human or admin key of the workspace whose log you want")
	}
	return p.Workspace, nil
}

// checkpoint integrates p's workspace's log and returns its latest signed
// checkpoint.
func (s *Service) checkpoint(ctx context.Context, p ladder.Principal) (ladder.TlogCheckpoint, error) {
	ws, err := logWorkspace(p)
	if err != nil {
		return ladder.TlogCheckpoint{}, err
	}
	if s.checkpoints == nil {
		return ladder.TlogCheckpoint{}, ladder.NotFound(ladder.CodeNotFound, "This server signs no checkpoints: it runs with --unsigned-audit.",
			"start the server with a checkpoint key (LADDER_CHECKPOINT_KEY; `ladder keys checkpoint-key` makes one)")
	}
	if _, err := s.adopt(ctx); err != nil {
		return ladder.TlogCheckpoint{}, err
	}
	cp, err := s.integrate(ctx, ws)
	if err != nil {
		return cp, err
	}
	if cp.Size == 0 {
		return cp, ladder.NotFound(ladder.CodeNotFound, "This workspace's audit log has no records yet.", "ask again once something was recorded")
	}
	return cp, nil
}

func checkpointView(c ladder.TlogCheckpoint) ladder.AuditCheckpoint {
	return ladder.AuditCheckpoint{Workspace: c.Workspace, Size: c.Size, Root: tlog.Hash(c.Root).String(), At: c.At, Note: c.Note}
}

// AuditCheckpoint returns the latest signed checkpoint of p's workspace's
// log, signing one first when records were added since the last.
func (s *Service) AuditCheckpoint(ctx context.Context, p ladder.Principal) (ladder.AuditCheckpoint, error) {
	cp, err := s.checkpoint(ctx, p)
	if err != nil {
		return ladder.AuditCheckpoint{}, err
	}
	return checkpointView(cp), nil
}

// AuditProof returns record seq of p's workspace with its inclusion proof
// in the latest checkpoint. A seq of another workspace is not found, as
// one that does not exist.
func (s *Service) AuditProof(ctx context.Context, p ladder.Principal, seq int64) (ladder.AuditProof, error) {
	cp, err := s.checkpoint(ctx, p)
	if err != nil {
		return ladder.AuditProof{}, err
	}
	notFound := ladder.NotFound(ladder.CodeNotFound, "This workspace's audit log has no record "+strconv.FormatInt(seq, 10)+".", "list the records with GET /v1/audit")
	leaf, err := s.store.TlogLeafOf(ctx, cp.Workspace, seq)
	if errors.Is(err, ladder.ErrNotFound) || err == nil && leaf >= cp.Size {
		return ladder.AuditProof{}, notFound
	}
	if err != nil {
		return ladder.AuditProof{}, err
	}
	recs, err := s.store.ListAudit(ctx, ladder.AuditQuery{Workspace: cp.Workspace, AfterSeq: seq - 1, Limit: 1})
	if err != nil {
		return ladder.AuditProof{}, err
	}
	if len(recs) != 1 || recs[0].Seq != seq {
		return ladder.AuditProof{}, notFound
	}
	proof, err := tlog.ProveRecord(cp.Size, leaf, translog.Reader(ctx, s.store, cp.Workspace))
	if err != nil {
		return ladder.AuditProof{}, fmt.Errorf("prove record %d: %w", seq, err)
	}
	return ladder.AuditProof{Record: recs[0], Leaf: leaf, LeafHash: translog.LeafHash(recs[0]).String(), Checkpoint: checkpointView(cp), Proof: hashStrings(proof)}, nil
}

// AuditConsistency proves that p's workspace's log at size to extends its
// log at size from; both at most the latest checkpoint's size.
func (s *Service) AuditConsistency(ctx context.Context, p ladder.Principal, from, to int64) (ladder.AuditConsistency, error) {
	cp, err := s.checkpoint(ctx, p)
	if err != nil {
		return ladder.AuditConsistency{}, err
	}
	switch {
	case from < 1:
		return ladder.AuditConsistency{}, ladder.InvalidField("from", "The size from="+strconv.FormatInt(from, 10)+" is below 1.", "send two tree sizes, 1 ≤ from ≤ to")
	case from > to:
		return ladder.AuditConsistency{}, ladder.InvalidField("from", fmt.Sprintf("The size from=%d is larger than to=%d.", from, to), "send two tree sizes, 1 ≤ from ≤ to")
	case to > cp.Size:
		return ladder.AuditConsistency{}, ladder.InvalidField("to", fmt.Sprintf("The size to=%d is beyond the log's latest checkpoint, of %d records.", to, cp.Size), "ask for sizes up to GET /v1/audit/checkpoint's size")
	}
	r := translog.Reader(ctx, s.store, cp.Workspace)
	proof, err := tlog.ProveTree(to, from, r)
	if err != nil {
		return ladder.AuditConsistency{}, fmt.Errorf("prove tree: %w", err)
	}
	fromRoot, err := tlog.TreeHash(from, r)
	if err != nil {
		return ladder.AuditConsistency{}, err
	}
	toRoot, err := tlog.TreeHash(to, r)
	if err != nil {
		return ladder.AuditConsistency{}, err
	}
	return ladder.AuditConsistency{Workspace: cp.Workspace, From: from, To: to, FromRoot: fromRoot.String(), ToRoot: toRoot.String(), Proof: hashStrings(proof)}, nil
}

// AuditLogExport writes p's workspace's log as a translog bundle: the
// latest signed checkpoint, then every record it covers with its leaf, in
// leaf order. It reads a page of records at a time.
func (s *Service) AuditLogExport(ctx context.Context, p ladder.Principal, begin func() io.Writer) error {
	cp, err := s.checkpoint(ctx, p)
	if err != nil {
		return err
	}
	bw := translog.NewBundleWriter(begin())
	if err := bw.Header(cp.Workspace, cp.Note); err != nil {
		return err
	}
	var leaf, after int64
	for leaf < cp.Size {
		recs, err := s.store.ListAudit(ctx, ladder.AuditQuery{Workspace: cp.Workspace, AfterSeq: after, Limit: int(min(exportPage, cp.Size-leaf))})
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return fmt.Errorf("export log of %s: records end at leaf %d of %d", cp.Workspace, leaf, cp.Size)
		}
		for _, rec := range recs {
			if err := bw.Leaf(leaf, rec); err != nil {
				return err
			}
			leaf, after = leaf+1, rec.Seq
		}
	}
	return nil
}

// verifyLog re-checks ws's transparency log: each record, in order, hashes
// to its stored leaf hash; the records recompute to the latest signed
// checkpoint's root, and so do the stored tree hashes; the checkpoint's
// note is signed by this server's key and states that size and root. The
// first failure is the verdict, naming the record or checkpoint. The
// checkpoint is read before the tree's size, so an integrator extending
// the tree meanwhile makes no false alarm.
func (s *Service) verifyLog(ctx context.Context, ws string) (ladder.AuditLogVerdict, error) {
	v := ladder.AuditLogVerdict{Workspace: ws, Intact: true}
	fail := func(seq int64, format string, args ...any) (ladder.AuditLogVerdict, error) {
		v.Intact, v.Reason = false, fmt.Sprintf(format, args...)
		if seq > 0 {
			v.BadSeq = &seq
		}
		return v, nil
	}
	cp, err := s.store.LatestCheckpoint(ctx, ws)
	if err != nil && !errors.Is(err, ladder.ErrNotFound) {
		return v, err
	}
	size, _, err := s.store.TlogHead(ctx, ws)
	if err != nil {
		return v, err
	}
	v.Leaves, v.CheckpointSize = size, cp.Size
	if cp.Size > size {
		return fail(0, "The signed checkpoint of workspace %s covers %d leaves but its tree has %d: leaves were deleted.", ws, cp.Size, size)
	}
	var (
		mem   translog.MemoryReader
		leaf  int64
		after int64
	)
	for leaf < size {
		recs, err := s.store.ListAudit(ctx, ladder.AuditQuery{Workspace: ws, AfterSeq: after, Limit: int(min(exportPage, size-leaf))})
		if err != nil {
			return v, err
		}
		if len(recs) == 0 {
			return fail(0, "Workspace %s's log has %d leaves but only %d records: records were deleted after leaf %d.", ws, size, leaf, leaf-1)
		}
		idx := make([]int64, len(recs))
		for i := range recs {
			idx[i] = tlog.StoredHashIndex(0, leaf+int64(i))
		}
		stored, err := s.store.TlogHashes(ctx, ws, idx)
		if err != nil {
			return v, err
		}
		for i, rec := range recs {
			if lh := translog.LeafHash(rec); lh != stored[i] {
				return fail(rec.Seq, "Record %d (leaf %d of workspace %s) does not hash to the leaf hash its log holds: the record or its leaf was altered.", rec.Seq, leaf, ws)
			}
			if leaf < cp.Size {
				if err := mem.Add(translog.LeafData(rec)); err != nil {
					return v, err
				}
			}
			leaf, after = leaf+1, rec.Seq
		}
	}
	if cp.Size == 0 {
		return v, nil
	}
	if s.checkpoints != nil {
		c, err := translog.Open(cp.Note, s.checkpoints.PublicKey())
		if err != nil {
			return fail(0, "The checkpoint of workspace %s at size %d does not verify with this server's key: %v.", ws, cp.Size, err)
		}
		if c.Tree.N != cp.Size || c.Tree.Hash != tlog.Hash(cp.Root) {
			return fail(0, "The checkpoint of workspace %s at size %d is stored with another size or root than its signed note states.", ws, cp.Size)
		}
	}
	root := tlog.Hash(cp.Root)
	fromRecords, err := tlog.TreeHash(cp.Size, &mem)
	if err != nil {
		return v, err
	}
	if fromRecords != root {
		return fail(0, "Workspace %s's first %d records hash to root %s, not the signed checkpoint's root %s: a record and its leaf were altered.", ws, cp.Size, fromRecords, root)
	}
	fromTree, err := tlog.TreeHash(cp.Size, translog.Reader(ctx, s.store, ws))
	if err != nil {
		return v, err
	}
	if fromTree != root {
		return fail(0, "Workspace %s's stored tree hashes give root %s at size %d, not the signed checkpoint's root %s: the stored tree was altered.", ws, fromTree, cp.Size, root)
	}
	return v, nil
}

func hashStrings(hs []tlog.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.String()
	}
	return out
}

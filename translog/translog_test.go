package translog

import (
	"encoding/json"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/ladderhq/ladder"
)

// TestLeafHash: the leaf hash an integration computes from a record read
// back (ladder.AuditRecord.LeafHash), and the one a store's append seals
// with the chain hash in one buffer (SealLeaf), are tlog.RecordHash of the
// record's canonical bytes, record after record, whether the record is
// long or short, first of its chain or not, written by the fast path or by
// encoding/json (a quote in the subject, data not yet canonical); and
// SealLeaf's chain hash is Seal's.
func TestLeafHash(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 123456000, time.UTC)
	recs := []ladder.AuditRecord{
		{Seq: 1, AuditEntry: ladder.AuditEntry{Workspace: "w", Actor: "key_a", Kind: ladder.AuditRoute, Subject: "q/s/item-1", At: at,
			Data: json.RawMessage(`{"item":"item-1","lane":"auto","reason":"a long reason that makes this record the longest of the three"}`)}},
		{Seq: 2, AuditEntry: ladder.AuditEntry{Workspace: "w", Actor: "key_a", Kind: ladder.AuditRoute, Subject: `q/s/"quoted"`, At: at,
			Data: json.RawMessage(`{"b":1, "a":2}`)}},
		{Seq: 3, AuditEntry: ladder.AuditEntry{Workspace: "w", Actor: "key_a", Kind: ladder.AuditPin, Subject: "q/s", At: at}},
	}
	prev := ""
	for _, rec := range recs {
		want := tlog.RecordHash(rec.Canonical())
		if lh := LeafHash(rec); lh != want {
			t.Errorf("record %d: LeafHash %v, want %v", rec.Seq, lh, want)
		}
		sealed, leafSealed := rec, rec
		sealed.Seal(prev)
		if got := tlog.Hash(leafSealed.SealLeaf(prev)); got != want {
			t.Errorf("record %d after %q: SealLeaf's leaf hash %v, want %v", rec.Seq, prev, got, want)
		}
		if leafSealed.PrevHash != sealed.PrevHash || leafSealed.Hash != sealed.Hash {
			t.Errorf("record %d after %q: SealLeaf sealed (%s, %s), Seal (%s, %s)", rec.Seq, prev, leafSealed.PrevHash, leafSealed.Hash, sealed.PrevHash, sealed.Hash)
		}
		prev = sealed.Hash
	}
}

package translog

import (
	"encoding/json"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/ladderhq/ladder"
)

// TestLeafHash: the leaf hash an integration computes in its reused buffer
// is tlog.RecordHash of the record's canonical bytes, record after record,
// whether the record is long or short, written by the fast path or by
// encoding/json (a quote in the subject, data not yet canonical).
func TestLeafHash(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 123456000, time.UTC)
	recs := []ladder.AuditRecord{
		{Seq: 1, AuditEntry: ladder.AuditEntry{Workspace: "w", Actor: "key_a", Kind: ladder.AuditRoute, Subject: "q/s/item-1", At: at,
			Data: json.RawMessage(`{"item":"item-1","lane":"auto","reason":"a long reason that makes this record the longest of the three"}`)}},
		{Seq: 2, AuditEntry: ladder.AuditEntry{Workspace: "w", Actor: "key_a", Kind: ladder.AuditRoute, Subject: `q/s/"quoted"`, At: at,
			Data: json.RawMessage(`{"b":1, "a":2}`)}},
		{Seq: 3, AuditEntry: ladder.AuditEntry{Workspace: "w", Actor: "key_a", Kind: ladder.AuditPin, Subject: "q/s", At: at}},
	}
	var buf []byte
	for _, rec := range recs {
		want := tlog.RecordHash(rec.Canonical())
		var got tlog.Hash
		got, buf = appendLeafHash(buf, rec)
		if got != want {
			t.Errorf("record %d: leaf hash in a reused buffer %v, want %v", rec.Seq, got, want)
		}
		if lh := LeafHash(rec); lh != want {
			t.Errorf("record %d: LeafHash %v, want %v", rec.Seq, lh, want)
		}
	}
}

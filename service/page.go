package service

import (
	"github.com/ladderhq/ladder"
)

// PageBytes bounds the payload, evidence and result bytes one page of a
// listing carries (GET /v1/approvals, gate history), whatever limit the
// client asks for: a page ends after the item that takes it to the bound
// (so it always holds at least one) and its next_cursor pages on from that
// item. Rows are read from the store in chunks sized to what the page
// still takes, so a request holds about one page of records at a time.
const PageBytes = 1 << 20

const (
	// pageChunk is the most rows one store read of a listing fetches.
	pageChunk = 50
	// firstChunk is the first read of a page, made before the size of the
	// rows is known: ten rows at the largest payload and evidence a
	// capability may take are still a bounded read.
	firstChunk = 10
)

// pageBudget counts one page's items and bytes and sizes its store reads.
type pageBudget struct {
	limit int // items the client asked for
	items int // items on the page
	bytes int // their bytes
	// seen and seenBytes are the rows read so far, for the size estimate.
	seen, seenBytes int
}

// full reports whether the page holds its limit of items or bytes.
func (b *pageBudget) full() bool { return b.items >= b.limit || b.bytes >= PageBytes }

// saw counts a row read from the store, on the page or not.
func (b *pageBudget) saw(n int) { b.seen, b.seenBytes = b.seen+1, b.seenBytes+n }

// add counts an item put on the page.
func (b *pageBudget) add(n int) { b.items, b.bytes = b.items+1, b.bytes+n }

// chunk is how many rows the next store read asks for: the items the page
// still takes plus one (to learn whether more follow), no more than the
// bytes left hold at the size of the rows read so far, and at most
// pageChunk.
func (b *pageBudget) chunk() int {
	n := min(b.limit-b.items+1, pageChunk)
	if b.seen == 0 {
		return max(1, min(n, firstChunk))
	}
	avg := max(b.seenBytes/b.seen, 1)
	return max(1, min(n, (PageBytes-b.bytes)/avg+1))
}

// approvalBytes is what an approval adds to a page: its payload, evidence,
// edited payload and result, the parts a caller chooses the size of.
func approvalBytes(a ladder.Approval) int {
	return len(a.Payload) + len(a.Evidence) + len(a.EditedPayload) + len(a.Result)
}

// gateBytes is what a gate decision adds to a page: its evidence and its
// explanations.
func gateBytes(d ladder.GateDecisionRecord) int {
	return len(d.Evidence) + len(d.HumanReadable) + len(d.Notes)
}

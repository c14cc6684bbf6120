package leaffeed

import (
	"testing"

	"github.com/ladderhq/ladder"
)

func leaves(ws string, from, n int) []Leaf {
	out := make([]Leaf, n)
	for i := range out {
		out[i] = Leaf{WS: ws, FedLeaf: ladder.FedLeaf{TlogLeaf: ladder.TlogLeaf{Index: int64(from + i), Seq: int64(from + i + 1)}, Hash: [32]byte{byte(from + i)}}}
	}
	return out
}

// TestTake: a workspace's leaves come back consecutive from the position
// asked, up to the limit and up to the first gap (a position another
// process appended), none when the position asked is not fed, and the
// ones before it are let go; workspaces do not mix.
func TestTake(t *testing.T) {
	var f Feed
	f.Take("a", 0, 0)
	f.Take("b", 0, 0)
	f.Publish(leaves("a", 0, 3))
	f.Publish(leaves("b", 0, 2))
	f.Publish(leaves("a", 5, 4)) // positions 3 and 4 were another process's
	if got := f.Take("a", 0, 2); len(got) != 2 || got[0].Index != 0 || got[1].Index != 1 || got[1].Hash != [32]byte{1} {
		t.Errorf("a from 0, limit 2: %v", got)
	}
	if got := f.Take("a", 1, 100); len(got) != 2 || got[1].Index != 2 {
		t.Errorf("a from 1: %v, want positions 1 and 2 (3 is not fed)", got)
	}
	if got := f.Take("a", 3, 100); len(got) != 0 {
		t.Errorf("a from 3: %v, want none", got)
	}
	if held := f.Held("a"); held != 4 {
		t.Errorf("a holds %d leaves after position 3 was asked, want the 4 after it", held)
	}
	if got := f.Take("a", 5, 100); len(got) != 4 || got[3].Index != 8 || got[3].Seq != 9 {
		t.Errorf("a from 5: %v", got)
	}
	if got := f.Take("a", 9, 100); len(got) != 0 || f.Held("a") != 0 {
		t.Errorf("a from 9 (all integrated): %v, %d held", got, f.Held("a"))
	}
	if got := f.Take("b", 0, 100); len(got) != 2 {
		t.Errorf("b from 0: %v", got)
	}
}

// TestPastTheBound: leaves that pile up past MaxLeaves across workspaces
// (integration does not run) are let go, all of them; positions before
// the newer ones are read back, and what integrations take makes room.
func TestPastTheBound(t *testing.T) {
	var f Feed
	f.Take("a", 0, 0)
	f.Take("b", 0, 0)
	f.Publish(leaves("a", 0, MaxLeaves/2))
	f.Publish(leaves("b", 0, MaxLeaves/2))
	f.Publish(leaves("a", MaxLeaves/2, 3))
	if f.Held("b") != 0 {
		t.Errorf("b holds %d leaves past the bound, want none", f.Held("b"))
	}
	if got := f.Take("a", 0, 10); len(got) != 0 {
		t.Errorf("a from 0 past the bound: %d leaves, want none (read back)", len(got))
	}
	if got := f.Take("a", MaxLeaves/2, 10); len(got) != 3 || got[0].Index != MaxLeaves/2 {
		t.Errorf("a from the newer leaves: %v, want the 3 published after the bound", got)
	}
	// Leaves taken by an integration no longer count against the bound.
	f.Publish(leaves("b", 0, MaxLeaves-3))
	f.Take("a", MaxLeaves/2+3, 10)
	f.Publish(leaves("a", MaxLeaves/2+3, 3))
	if f.Held("b") != MaxLeaves-3 || f.Held("a") != 3 {
		t.Errorf("after a's leaves were taken: a holds %d, b %d; want 3 and %d", f.Held("a"), f.Held("b"), MaxLeaves-3)
	}
}

// TestTakeCopies: what Take returns is the caller's; leaves published
// after do not change it.
func TestTakeCopies(t *testing.T) {
	var f Feed
	f.Take("w", 0, 0)
	f.Publish(leaves("w", 0, 2))
	got := f.Take("w", 0, 10)
	f.Publish(leaves("w", 2, 1))
	got[0].Seq = 99
	if again := f.Take("w", 0, 10); len(again) != 3 || again[0].Seq != 1 {
		t.Errorf("after the caller changed its copy: %v", again)
	}
}

// TestKeptOnceAsked: a workspace's leaves are kept only once an
// integration has asked for them, so a process that writes and never
// integrates holds none; leaves published before the first ask are read
// back.
func TestKeptOnceAsked(t *testing.T) {
	var f Feed
	f.Publish(leaves("w", 0, 3))
	if f.Held("w") != 0 || f.Asked() {
		t.Fatalf("%d leaves held (asked %v) before any integration asked", f.Held("w"), f.Asked())
	}
	if got := f.Take("w", 0, 10); len(got) != 0 || !f.Asked() {
		t.Errorf("first ask: %v (asked %v), want none (read back)", got, f.Asked())
	}
	f.Publish(leaves("w", 3, 2))
	f.Publish(leaves("other", 0, 2))
	if got := f.Take("w", 3, 10); len(got) != 2 || got[0].Index != 3 {
		t.Errorf("after the first ask: %v, want positions 3 and 4", got)
	}
	if f.Held("other") != 0 {
		t.Errorf("a workspace never asked for holds %d leaves", f.Held("other"))
	}
}

// TestOutOfOrder: leaves published out of position order are never
// returned out of place: a position asked for that is not first in line
// is read back, and the leaves behind are let go once passed.
func TestOutOfOrder(t *testing.T) {
	var f Feed
	f.Take("w", 0, 0)
	f.Publish(leaves("w", 3, 3))
	f.Publish(leaves("w", 0, 3))
	if got := f.Take("w", 0, 10); len(got) != 0 {
		t.Errorf("from 0 behind positions 3 to 5: %v, want none (read back)", got)
	}
	if got := f.Take("w", 3, 10); len(got) != 3 || got[2].Index != 5 {
		t.Errorf("from 3: %v, want positions 3 to 5", got)
	}
	if got := f.Take("w", 6, 10); len(got) != 0 || f.Held("w") != 0 {
		t.Errorf("from 6: %v with %d held, want none and everything passed let go", got, f.Held("w"))
	}
}

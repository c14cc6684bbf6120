package main

import (
	"strings"
	"testing"
)

// TestReadOnlyMappings picks the executable's code and read-only data out
// of /proc/self/maps, and nothing it may not hand back: its writable data,
// other files, anonymous memory.
func TestReadOnlyMappings(t *testing.T) {
	const maps = `00400000-014a7000 r-xp 00000000 fd:01 2097 /opt/ladder/bin/ladder
014a7000-02806000 r--p 010a7000 fd:01 2097 /opt/ladder/bin/ladder
02806000-028dd000 rw-p 02406000 fd:01 2097 /opt/ladder/bin/ladder
028dd000-0492d000 rw-p 00000000 00:00 0
7f66cddf2000-7f66cde18000 r--p 00000000 fd:01 3311 /usr/lib/x86_64-linux-gnu/libc.so.6
7f66cde18000-7f66cdf6e000 r-xp 00026000 fd:01 3311 /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000000000-7f0000001000 r--p 00000000 fd:01 2099 /opt/ladder/bin/ladder-old
7ffd1c3a2000-7ffd1c3c3000 rw-p 00000000 00:00 0 [stack]
`
	got, err := readOnlyMappings(strings.NewReader(maps), "/opt/ladder/bin/ladder")
	if err != nil {
		t.Fatal(err)
	}
	want := []mapping{{0x400000, 0x14a7000}, {0x14a7000, 0x2806000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %x, want %x", got, want)
	}

	// Replaced on disk since it started (an upgrade in place): the kernel
	// marks the path, and the mapping still holds the running binary.
	deleted := strings.ReplaceAll(maps, "/opt/ladder/bin/ladder\n", "/opt/ladder/bin/ladder (deleted)\n")
	if got, _ := readOnlyMappings(strings.NewReader(deleted), "/opt/ladder/bin/ladder"); len(got) != 2 {
		t.Fatalf("a replaced binary's mappings: got %x, want 2 ranges", got)
	}
	// A path with a space is one path.
	spaced := "00400000-00401000 r-xp 00000000 fd:01 7 /opt/my apps/ladder\n"
	if got, _ := readOnlyMappings(strings.NewReader(spaced), "/opt/my apps/ladder"); len(got) != 1 {
		t.Fatalf("a path with a space: got %x, want 1 range", got)
	}
}

func TestResidentFile(t *testing.T) {
	const status = "Name:\tladder\nVmRSS:\t   52816 kB\nRssAnon:\t   21432 kB\nRssFile:\t   31384 kB\nRssShmem:\t       0 kB\n"
	if b, ok := residentFile(strings.NewReader(status)); !ok || b != 31384<<10 {
		t.Fatalf("got %d %v, want %d", b, ok, 31384<<10)
	}
	if _, ok := residentFile(strings.NewReader("Name:\tladder\n")); ok {
		t.Fatal("no RssFile line read as one")
	}
}

package sqlite

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/storetest"
)

// TestPingSeesAFullDisk runs the store on a 2 MiB tmpfs, fills it, and
// expects Ping (the readiness probe) to fail with ErrUnavailable once
// writes do, and to succeed again once space is freed. An empty
// transaction, Ping's old probe, commits on a full disk.
func TestPingSeesAFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs; skipped with -short")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a 2 MiB tmpfs here (%v: %s)", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v %s", dir, err, out)
		}
	})
	ctx := t.Context()
	s := openPath(t, filepath.Join(dir, "ladder.db"))
	defer s.Close()
	storetest.AskFed(s, "ws-a")
	appendN(t, s, 5)
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping before the disk fills: %v", err)
	}

	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			break
		}
	}
	f.Close()

	big := map[string]string{"blob": strings.Repeat("x", 2000)}
	write := func(i int) error {
		e, err := ladder.NewAuditEntry("ws-a", "system", ladder.AuditCall, fmt.Sprint("full-", i), t0, big)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.AppendAudit(ctx, e)
		return err
	}
	// SQLite may reuse WAL space for a while: write until the disk says no.
	fitted := 0
	for ; fitted < 2000 && write(fitted) == nil; fitted++ {
	}
	// The probe's one small row can fit where a 2 kB record did not; a
	// few more refused writes use up what is left.
	var perr error
	attempts := 0
	for attempts < 50 {
		attempts++
		if perr = s.Ping(ctx); perr != nil {
			break
		}
		_ = write(10000 + attempts)
	}
	if !errors.Is(perr, ladder.ErrUnavailable) {
		t.Fatalf("Ping on a full disk after %d attempts: %v, want ErrUnavailable", attempts, perr)
	}
	t.Logf("%d writes fitted after the disk filled; Ping failed on attempt %d: %v", fitted, attempts, perr)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after space was freed: %v", err)
	}
	if err := write(-1); err != nil {
		t.Fatalf("write after space was freed: %v", err)
	}
	if _, err := ladder.VerifyAudit(ctx, s); err != nil {
		t.Errorf("VerifyAudit after the disk was full: %v", err)
	}
	// A batch the full disk failed fed no leaf.
	storetest.CheckFed(t, s)
}

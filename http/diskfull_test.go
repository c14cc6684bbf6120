package http_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
)

// smallFS mounts a 2 MiB tmpfs for the test, or skips when the machine does
// not allow mounting (not root, no CAP_SYS_ADMIN, no mount binary).
func smallFS(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("mounts a tmpfs; skipped with -short")
	}
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a 2 MiB tmpfs here (%v: %s); the fault-injecting store covers disk full in TestStoreFaultsRefuseAndRecover", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// fill writes zeros to path until the filesystem is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			_ = f.Sync()
			return
		}
	}
}

// TestDiskFullOnRealFilesystem runs the server on SQLite in a 2 MiB tmpfs,
// fills the filesystem, sees writes refused with AUDIT_UNAVAILABLE, the
// upstream not called and /readyz not ready (also with no traffic), frees
// the space and sees /readyz ready and service resume by itself with an
// intact audit chain.
func TestDiskFullOnRealFilesystem(t *testing.T) {
	dir := smallFS(t)
	idle := testenvIdleServer(t)
	e := testenv.StartWith(t, capConfig(idle, idle), testenv.Options{DBPath: filepath.Join(dir, "ladder.db")})
	agent := e.Keys["acme/agent"]
	if r := e.Do("POST", "/v1/route", agent, map[string]any{"step": "auto_step", "item": "before"}); r.Status != 200 {
		t.Fatalf("route before: %d %s", r.Status, r.Raw)
	}
	filler := filepath.Join(dir, "filler")
	fill(t, filler)

	// SQLite may still have free pages; keep writing until the disk says no.
	var refused testenv.Response
	okBefore := 0
	for i := range 2000 {
		r := e.Do("POST", "/v1/route", agent, map[string]any{"step": "auto_step", "item": fmt.Sprintf("full-%d-%s", i, bytes.Repeat([]byte("x"), 400))})
		if r.Status == 200 {
			okBefore++
			continue
		}
		refused = r
		break
	}
	if refused.Status != 503 || refused.ErrorCode() != "AUDIT_UNAVAILABLE" {
		t.Fatalf("after %d routes on a full disk: %d %s, want 503 AUDIT_UNAVAILABLE", okBefore, refused.Status, refused.Raw)
	}
	t.Logf("%d routes fit in SQLite's free pages before the disk refused", okBefore)
	upstreamBefore := e.Upstream.Calls()
	if r := e.Do("POST", "/v1/capabilities/acme:post/call", agent, map[string]any{"payload": map[string]any{"bill_id": "B-full"}, "idempotency_key": "B-full"}); r.Status != 503 || r.ErrorCode() != "AUDIT_UNAVAILABLE" {
		t.Fatalf("call on a full disk: %d %s", r.Status, r.Raw)
	}
	if e.Upstream.Calls() != upstreamBefore {
		t.Fatal("the upstream was called while the audit log could not be written")
	}
	if v := metricValue(t, e, `ladder_refusals_total{code="AUDIT_UNAVAILABLE",surface="rest"}`); v < 2 {
		t.Fatalf("refusals counted: %v", v)
	}

	// /readyz says so at once, and why, while reads still answer.
	r := e.Do("GET", "/readyz", "", nil)
	if reason, _ := r.Body["reason"].(string); r.Status != 503 || !strings.Contains(reason, "disk is full") || strings.Contains(reason, dir) {
		t.Fatalf("readyz on a full disk: %d %s", r.Status, r.Raw)
	}
	if r := e.Do("GET", "/v1/steps", agent, nil); r.Status != 200 {
		t.Errorf("read on a full disk: %d %s", r.Status, r.Raw)
	}
	// With no traffic, once the refusals are old, its own probe write
	// keeps it not ready: the balancer does not send calls back.
	time.Sleep(3500 * time.Millisecond)
	for i := range 3 {
		if r := e.Do("GET", "/readyz", "", nil); r.Status != 503 {
			t.Fatalf("readyz %d on a full disk with no traffic: %d %s", i, r.Status, r.Raw)
		}
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// Freed space is seen by the next probe, with no call made.
	freed := time.Now()
	for {
		r := e.Do("GET", "/readyz", "", nil)
		if r.Status == 200 {
			break
		}
		if time.Since(freed) > 5*time.Second {
			t.Fatalf("readyz 5s after freeing space: %d %s", r.Status, r.Raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("ready %s after space was freed", time.Since(freed).Round(time.Millisecond))
	if r := e.Do("POST", "/v1/capabilities/acme:post/call", agent, map[string]any{"payload": map[string]any{"bill_id": "B-full"}, "idempotency_key": "B-full"}); r.Status != 200 || r.Body["status"] != "executed" {
		t.Fatalf("call after freeing space: %d %s", r.Status, r.Raw)
	}
	if n, err := ladder.VerifyAudit(t.Context(), e.Store); err != nil {
		t.Fatalf("audit chain after disk full: %v (after %d)", err, n)
	}
}

func testenvIdleServer(t *testing.T) string {
	t.Helper()
	s := newIdleServer()
	t.Cleanup(s.Close)
	return s.URL
}

func newIdleServer() *httptest.Server { return httptest.NewServer(http.NotFoundHandler()) }

package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestReturnExecutablePages hands this test binary's code back to the
// kernel; the test goes on running on it, read back as it is used.
func TestReturnExecutablePages(t *testing.T) {
	r, err := returnExecutablePages()
	if err != nil {
		t.Skipf("this kernel does not reclaim on request (MADV_PAGEOUT, Linux 5.4): %v", err)
	}
	if r.after >= r.before {
		t.Fatalf("resident file memory %d bytes before, %d after: nothing handed back", r.before, r.after)
	}
}

// TestServerReturnsStartupPages starts the real binary and checks that,
// once up, it has handed its start-up pages back, says so, and serves on.
// The binary is a private copy: the kernel keeps pages another process
// maps, and other tests run the shared build at the same time.
func TestServerReturnsStartupPages(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "ladder")
	src, err := os.ReadFile(ladderBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	// Written through to disk, as a deployed binary is: the kernel
	// reclaims a page not yet on disk only after writing it out.
	f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(src); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(bin, "demo", "--addr", addr, "--keys", filepath.Join(dir, "keys.json"), "--db", filepath.Join(dir, "demo.db"))
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	lines := logRecords(t, stderr)
	var before, after float64
	timeout := time.After(2 * time.Minute)
	for before == 0 {
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatal("the demo ended without handing back its start-up pages")
			}
			if m["msg"] == "start-up pages of the executable returned to the kernel" {
				before, _ = m["resident_file_mib_before"].(float64)
				after, _ = m["resident_file_mib_after"].(float64)
				if before == 0 {
					t.Fatalf("logged without the resident memory before: %v", m)
				}
			}
		case <-timeout:
			t.Fatal("no start-up pages handed back within 2 minutes")
		}
	}
	if after > before/2 {
		t.Fatalf("resident file memory %.1f MiB before, %.1f after: most of it kept", before, after)
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz after the pages went back: %d", resp.StatusCode)
	}
}

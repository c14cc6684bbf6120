package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestServerOnOneCPU starts the real binary on one CPU, as a one-CPU
// machine or container would run it: the SQLite server raises Go's
// processors to two (its writer's fsync would otherwise stall every
// request), unless the operator set GOMAXPROCS, which stands with a
// warning.
func TestServerOnOneCPU(t *testing.T) {
	bin := ladderBinary(t)
	tests := []struct {
		name    string
		env     string // GOMAXPROCS, "" for unset
		wantMsg string
		wantLvl string
	}{
		{"default", "", procsRaised, "INFO"},
		{"operator's GOMAXPROCS=1", "1", procsLow, "WARN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(bin, "demo", "--addr", freeAddr(t), "--keys", filepath.Join(dir, "keys.json"), "--db", filepath.Join(dir, "demo.db"))
			cmd.Dir = dir
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "GOMAXPROCS=") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			if tt.env != "" {
				cmd.Env = append(cmd.Env, "GOMAXPROCS="+tt.env)
			}
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			startOnOneCPU(t, cmd)
			t.Cleanup(func() {
				cmd.Process.Kill()
				cmd.Wait()
			})
			lines := logRecords(t, stderr)
			timeout := time.After(60 * time.Second)
			for {
				select {
				case m, ok := <-lines:
					if !ok {
						t.Fatalf("the demo ended without logging %q", tt.wantMsg)
					}
					if m["msg"] == procsRaised || m["msg"] == procsLow {
						if m["msg"] != tt.wantMsg || m["level"] != tt.wantLvl {
							t.Fatalf("logged %v %q, want %s %q", m["level"], m["msg"], tt.wantLvl, tt.wantMsg)
						}
						// On one CPU Go chose one processor; the raise says so.
						if m["msg"] == procsRaised && (m["from"] != float64(1) || m["to"] != float64(minProcs)) {
							t.Fatalf("raised from %v to %v, want from 1 to %d", m["from"], m["to"], minProcs)
						}
						return
					}
					if m["msg"] == "listening" {
						t.Fatalf("the demo listened without logging %q", tt.wantMsg)
					}
				case <-timeout:
					t.Fatalf("no %q within 60 s", tt.wantMsg)
				}
			}
		})
	}
}

// startOnOneCPU starts cmd from a thread allowed only one CPU, so the
// child inherits that affinity and Go in it sees one CPU.
func startOnOneCPU(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var saved, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &saved); err != nil {
		t.Fatal(err)
	}
	for cpu := 0; cpu < 1024; cpu++ {
		if saved.IsSet(cpu) {
			one.Set(cpu)
			break
		}
	}
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := unix.SchedSetaffinity(0, &saved); err != nil {
			t.Error(err)
		}
	}()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

// logRecords reads a child's JSON log from r, a record a line, until r
// ends or the test does.
func logRecords(t *testing.T, r io.Reader) <-chan map[string]any {
	lines := make(chan map[string]any)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				select {
				case lines <- m:
				case <-done:
					return
				}
			}
		}
	}()
	return lines
}

// Package loadkit holds what the load tools under bench/ (routes,
// replicas, startup) share: their work folder with the demo config and a
// build of ladder, the backends they measure and a fresh database on each,
// starting `ladder serve` (and timing its start) and an agent key on it, a
// closed-loop load with its latency percentiles, posting JSON to a running
// ladder, dropping a throwaway PostgreSQL schema, and printing a latency.
package loadkit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ladderhq/ladder/config"
)

// Ms formats d in milliseconds with two decimals, as the tools print them.
func Ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// RandHex returns n random bytes in hex, for schema names and keys that
// must not collide between runs.
func RandHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// DropSchema drops a run's PostgreSQL schema and everything in it.
func DropSchema(dsn, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	return err
}

// Post sends a JSON request and reads the whole answer, so the connection
// is reused.
func Post(c *http.Client, method, url, key string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("encode body: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Serve starts `ladder serve` from bin with args on addr, its environment
// extended by env, and waits up to ready for /readyz to answer 200. stop
// interrupts it and waits for it to exit (killing it after 15 s).
func Serve(bin, addr string, args, env []string, client *http.Client, ready time.Duration) (base string, stop func(), err error) {
	p, err := Start(bin, addr, args, env)
	if err != nil {
		return "", nil, err
	}
	if _, err := p.Await(client, "/readyz", 20*time.Millisecond, ready); err != nil {
		p.Stop()
		return "", nil, err
	}
	return p.Base, p.Stop, nil
}

// Process is one `ladder serve` started by Start.
type Process struct {
	// Base is its URL, http://addr.
	Base    string
	started time.Time
	cmd     *exec.Cmd
	logs    *bytes.Buffer
	exited  chan struct{}
}

// Start starts `ladder serve` from bin with args on addr, its environment
// extended by env, and returns without waiting for it.
func Start(bin, addr string, args, env []string) (*Process, error) {
	cmd := exec.Command(bin, append([]string{"serve", "--addr", addr}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	p := &Process{Base: "http://" + addr, cmd: cmd, logs: &bytes.Buffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.logs
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { cmd.Wait(); close(p.exited) }()
	return p, nil
}

// Await polls path every interval until it answers 200 and returns how long
// after the start that was; it fails when the process exits first or within
// passes.
func (p *Process) Await(client *http.Client, path string, every, within time.Duration) (time.Duration, error) {
	for deadline := time.Now().Add(within); ; {
		if st, _, err := Post(client, "GET", p.Base+path, "", nil); err == nil && st == 200 {
			return time.Since(p.started), nil
		}
		select {
		case <-p.exited:
			return 0, fmt.Errorf("ladder serve exited: %s", p.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("ladder serve: %s not 200 within %s", path, within)
		}
		time.Sleep(every)
	}
}

// Stop interrupts the process and waits for it to exit (killing it after
// 15 s).
func (p *Process) Stop() {
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// Workdir makes a temporary folder for a tool's run, named after prefix,
// with the demo config in it (cfg). When bin points at "", it also builds
// ./cmd/ladder there (run from the repository root) and sets *bin to the
// binary. cleanup removes the folder.
func Workdir(prefix string, bin *string) (dir, cfg string, cleanup func(), err error) {
	dir, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	if bin != nil && *bin == "" {
		*bin = filepath.Join(dir, "ladder")
		if out, err := exec.Command("go", "build", "-o", *bin, "./cmd/ladder").CombinedOutput(); err != nil {
			cleanup()
			return "", "", nil, fmt.Errorf("go build ./cmd/ladder (run from the repository root): %v\n%s", err, out)
		}
	}
	if bin != nil {
		// On disk, as an installed binary is: ladder hands its start-up
		// pages back to the kernel once up, and the kernel reclaims a page
		// of a file still being written only after writing it out.
		if err := syncFile(*bin); err != nil {
			cleanup()
			return "", "", nil, err
		}
	}
	cfg = filepath.Join(dir, "ladder.yaml")
	if err := os.WriteFile(cfg, config.Demo(), 0o600); err != nil {
		cleanup()
		return "", "", nil, err
	}
	return dir, cfg, cleanup, nil
}

// ForBackends calls f for each backend named in list ("sqlite,postgres"),
// in order, and stops at its first error; PostgreSQL is skipped, saying
// so on standard error, when pg is "". tool names the caller in messages.
func ForBackends(tool, list, pg string, f func(backend string) error) error {
	for _, b := range strings.Split(list, ",") {
		switch b {
		case "sqlite":
		case "postgres":
			if pg == "" {
				fmt.Fprintf(os.Stderr, "%s: no -pg DSN and LADDER_TEST_POSTGRES unset; skipping PostgreSQL\n", tool)
				continue
			}
		default:
			return fmt.Errorf("unknown backend %q; use sqlite, postgres", b)
		}
		if err := f(b); err != nil {
			return fmt.Errorf("%s: %w", b, err)
		}
	}
	return nil
}

// FreshDB returns a new, empty database of backend for `ladder serve
// --db` and the environment it needs: a file named name in dir, or for
// postgres a new schema on pg (LADDER_PG_SCHEMA), which drop removes.
func FreshDB(tool, backend, dir, name, pg string) (db string, env []string, drop func()) {
	if backend != "postgres" {
		return filepath.Join(dir, name+".db"), nil, func() {}
	}
	schema := "ladder_" + tool + "_" + RandHex(6)
	return pg, []string{"LADDER_PG_SCHEMA=" + schema}, func() {
		if err := DropSchema(pg, schema); err != nil {
			fmt.Fprintf(os.Stderr, "%s: drop schema: %v\n", tool, err)
		}
	}
}

// NewClient returns an HTTP client that keeps one connection per load
// client alive.
func NewClient(clients int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients, IdleConnTimeout: time.Minute,
	}}
}

// AgentKey creates an agent key of workspace through the admin key and
// returns its token.
func AgentKey(client *http.Client, base, admin, workspace, name string) (string, error) {
	st, body, err := Post(client, "POST", base+"/v1/keys", admin, map[string]string{"workspace": workspace, "kind": "agent", "name": name})
	if err != nil || st != http.StatusCreated {
		return "", fmt.Errorf("create agent key: %d %s %v", st, body, err)
	}
	var key struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(body, &key); err != nil {
		return "", err
	}
	return key.Token, nil
}

// Result is what Load measured: calls that succeeded inside the measured
// window, per group, those that failed, and the latency of the successes.
type Result struct {
	OK       []int
	Failed   int
	Elapsed  time.Duration
	P50, P99 time.Duration
	FirstErr string
}

// Total is the number of successful calls over every group.
func (r Result) Total() int {
	n := 0
	for _, ok := range r.OK {
		n += ok
	}
	return n
}

// Load runs clients closed-loop clients, each calling call(client, n) with
// its running count n until the end, for warmup unmeasured and then
// duration measured. call returns its group (an index below groups) and
// whether it succeeded, with a description of a failure. Calls that finish
// after the window closes are not counted; calls in flight when it opened
// are (a wash at these durations).
func Load(clients, groups int, warmup, duration time.Duration, call func(client, n int) (group int, failure string)) Result {
	var (
		measuring, stop atomic.Bool
		failed          atomic.Int64
		firstErr        atomic.Value
		mu              sync.Mutex
		lat             []time.Duration
		wg              sync.WaitGroup
	)
	ok := make([]atomic.Int64, groups)
	for c := range clients {
		wg.Go(func() {
			var mine []time.Duration
			for n := 0; !stop.Load(); n++ {
				t0 := time.Now()
				g, failure := call(c, n)
				d := time.Since(t0)
				if !measuring.Load() {
					continue
				}
				if failure != "" {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, failure)
					continue
				}
				ok[g].Add(1)
				mine = append(mine, d)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	time.Sleep(warmup)
	measuring.Store(true)
	start := time.Now()
	time.Sleep(duration)
	measuring.Store(false)
	elapsed := time.Since(start)
	stop.Store(true)
	wg.Wait()
	r := Result{OK: make([]int, groups), Failed: int(failed.Load()), Elapsed: elapsed}
	for g := range ok {
		r.OK[g] = int(ok[g].Load())
	}
	if e, ok := firstErr.Load().(string); ok {
		r.FirstErr = e
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.P50 = lat[len(lat)*50/100]
		r.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return r
}

// PostRoute posts one route and describes a failure ("" when answered
// 200).
func PostRoute(client *http.Client, base, token string, req map[string]string) string {
	st, body, err := Post(client, "POST", base+"/v1/route", token, req)
	if err != nil || st != http.StatusOK {
		return fmt.Sprintf("%d %s %v", st, bytes.TrimSpace(body), err)
	}
	return ""
}

// CallRouteItem routes one item with the MCP tool route_item (a stateless
// tools/call on /mcp) and describes a failure ("" when a route came back).
func CallRouteItem(client *http.Client, base, token string, args map[string]string) string {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "route_item", "arguments": args}})
	if err != nil {
		return err.Error()
	}
	req, err := http.NewRequest("POST", base+"/mcp", bytes.NewReader(body))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"route_id`)) || bytes.Contains(b, []byte(`"isError":true`)) {
		return fmt.Sprintf("%d %s %v", resp.StatusCode, bytes.TrimSpace(b), err)
	}
	return ""
}

// syncFile writes the file at path through to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

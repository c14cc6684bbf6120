package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder/demo"
	"github.com/ladderhq/ladder/internal/testenv"
)

var buildOnce struct {
	sync.Once
	path string
	err  error
}

// TestMain removes the binary ladderBinary built (55 MB a run, in the
// system's temporary directory, which no test's TempDir cleans).
func TestMain(m *testing.M) {
	code := m.Run()
	if buildOnce.path != "" {
		_ = os.RemoveAll(filepath.Dir(buildOnce.path))
	}
	os.Exit(code)
}

// ladderBinary builds the real binary once per test run.
func ladderBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test builds the binary; skipped with -short")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ladder-e2e-")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.path = filepath.Join(dir, "ladder")
		out, err := exec.Command("go", "build", "-o", buildOnce.path, ".").CombinedOutput()
		if err != nil {
			buildOnce.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildOnce.err != nil {
		t.Fatal(buildOnce.err)
	}
	return buildOnce.path
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// demoProcess is a running `ladder demo`.
type demoProcess struct {
	URL  string
	Keys demoKeys
	cmd  *exec.Cmd
}

// startDemo starts `ladder demo` on a free loopback port and waits until
// /healthz answers.
func startDemo(t *testing.T, extra ...string) *demoProcess {
	t.Helper()
	bin := ladderBinary(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	keysFile := filepath.Join(dir, "keys.json")
	args := append([]string{"demo", "--addr", addr, "--keys", keysFile, "--db", filepath.Join(dir, "demo.db")}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
		}
	}()
	url := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo did not answer /healthz within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("demo answered /healthz %s after start", time.Since(started).Round(time.Millisecond))
	d := &demoProcess{URL: url, cmd: cmd}
	data, err := os.ReadFile(keysFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &d.Keys); err != nil {
		t.Fatal(err)
	}
	return d
}

// session opens a go-sdk client session on the demo's /mcp with key,
// closed when the test ends.
func (d *demoProcess) session(t *testing.T, key string) *sdk.ClientSession {
	t.Helper()
	client := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: d.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{key}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

func checkSession(t *testing.T, cs *sdk.ClientSession) {
	t.Helper()
	ctx := context.Background()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"which_steps_run_alone", "step_evidence", "route_item"} {
		if !strings.Contains(strings.Join(names, ","), want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "step_evidence", Arguments: map[string]any{"step": "Decide hold or release"}})
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	text := res.Content[0].(*sdk.TextContent).Text
	if !strings.HasPrefix(text, "Decide hold or release is in shadow. Evidence to week 14: ") {
		t.Fatalf("step_evidence text %q", text)
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "which_steps_run_alone", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*sdk.TextContent).Text; !strings.HasPrefix(text, "Runs alone (Auto): Read the bill; Post to the TMS. 5 other steps need a person.") {
		t.Fatalf("which_steps_run_alone text %q", text)
	}
}

// TestEndToEndMCP builds and starts the real binary and drives it with the
// go-sdk client over streamable HTTP and over stdio.
func TestEndToEndMCP(t *testing.T) {
	d := startDemo(t)
	agent := d.Keys.Workspaces["vantrow-bills"]["agent"]

	t.Run("streamable HTTP", func(t *testing.T) {
		checkSession(t, d.session(t, agent))
	})

	t.Run("stdio", func(t *testing.T) {
		cmd := exec.Command(ladderBinary(t), "mcp", "--stdio", "--server", d.URL, "--key", agent)
		cmd.Stderr = os.Stderr
		client := sdk.NewClient(&sdk.Implementation{Name: "e2e-stdio", Version: "1"}, nil)
		cs, err := client.Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		checkSession(t, cs)
	})

	t.Run("REST", func(t *testing.T) {
		req, _ := http.NewRequest("GET", d.URL+"/v1/steps/bills/post_tms/evidence", nil)
		req.Header.Set("Authorization", "Bearer "+agent)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var pack struct {
			Lane      string  `json:"lane"`
			AuditRate float64 `json:"audit_rate"`
			Why       string  `json:"why"`
			Figures   struct {
				Rolling4 struct {
					Accuracy float64 `json:"accuracy"`
				} `json:"rolling_4"`
			} `json:"figures"`
		}
		json.NewDecoder(resp.Body).Decode(&pack)
		if pack.Lane != "auto" || pack.AuditRate != 0.1 || pack.Figures.Rolling4.Accuracy < 0.99 || !strings.HasPrefix(pack.Why, "Audits in the last 2 weeks: ") {
			t.Fatalf("post_tms pack: %+v", pack)
		}
	})

	// A capability call reaches the demo's upstream MCP server over the
	// pool's session and shows in /metrics, so an operator can tell a slow
	// upstream from a slow ladder.
	t.Run("capability call counted in /metrics", func(t *testing.T) {
		cs := d.session(t, d.Keys.Workspaces["partner-programs"]["agent"])
		for range 2 {
			readLedger(t, cs)
		}
		resp, err := http.Get(d.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{
			`ladder_upstream_calls_total{capability="ticket6:readLedger",executor="mcp",outcome="ok"} 2`,
			`ladder_upstream_call_seconds_count{capability="ticket6:readLedger",executor="mcp"} 2`,
		} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		// The store's group commit: the calls above were written, each
		// write in a commit, so there are commits and at least as many
		// writes.
		value := func(name string) float64 {
			v, ok := testenv.MetricValue(t, body, name)
			if !ok {
				t.Fatalf("/metrics lacks %s", name)
			}
			return v
		}
		if commits, writes := value("ladder_store_commits_total"), value("ladder_store_writes_total"); commits < 1 || writes < commits {
			t.Errorf("/metrics: ladder_store_commits_total %v, ladder_store_writes_total %v; want commits, and at least one write each", commits, writes)
		}
	})
}

// readLedger calls the demo's ticket6:readLedger capability over cs and
// fails unless the ledger's answer comes back.
func readLedger(t *testing.T, cs *sdk.ClientSession) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "ticket6:readLedger",
		Arguments: map[string]any{"program": "partner-2027", "relationship": "relationship:partner-2027:creator-1", "payload": map[string]any{}}})
	if err != nil || res.IsError {
		t.Fatalf("ticket6:readLedger: %v %+v", err, res)
	}
	if sc, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(sc), `"balance"`) {
		t.Fatalf("ticket6:readLedger answered %s, want the ledger's entries and balance", sc)
	}
}

// TestDemoWithUpstreamElsewhere: `ladder demo --upstream URL` calls the
// stand-in systems another process serves at URL (as bench/standin does,
// for measuring ladder with its upstream outside its process) and serves
// none of its own: a capability call through the real binary reaches the
// stand-ins this test serves, once per call.
func TestDemoWithUpstreamElsewhere(t *testing.T) {
	up, err := demo.ListenUpstream("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	d := startDemo(t, "--upstream", up.URL+"/")
	before := up.Calls()
	cs := d.session(t, d.Keys.Workspaces["partner-programs"]["agent"])
	for i := range 3 {
		readLedger(t, cs)
		if n := up.Calls() - before; n != int64(i+1) {
			t.Fatalf("after %d calls through ladder the stand-ins at %s served %d", i+1, up.URL, n)
		}
	}
}

// TestDemoUpstreamRefused: a --upstream that is not a base URL, or where
// nothing listens, fails at once with what to do, before the demo seeds or
// writes its files.
func TestDemoUpstreamRefused(t *testing.T) {
	dir := t.TempDir()
	closed := freeAddr(t)
	for _, c := range []struct{ url, want string }{
		{"ftp://127.0.0.1:1", "want the stand-ins' base URL"},
		{"127.0.0.1:18954", "want the stand-ins' base URL"},
		{"http://127.0.0.1:18954/?x=1", "want the stand-ins' base URL"},
		{"http://" + closed, "nothing answers there"},
	} {
		keys := filepath.Join(dir, "keys.json")
		start := time.Now()
		_, _, err := runCLI(t, nil, "demo", "--upstream", c.url, "--addr", freeAddr(t), "--db", filepath.Join(dir, "demo.db"), "--keys", keys)
		if exitCode(err) != 3 || err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--upstream") {
			t.Errorf("--upstream %s: exit %d, %v; want exit 3 and %q", c.url, exitCode(err), err, c.want)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("--upstream %s took %s to fail; it should fail before seeding", c.url, d)
		}
		if _, err := os.Stat(keys); err == nil {
			t.Errorf("--upstream %s: the demo wrote its keys file", c.url)
		}
	}
}

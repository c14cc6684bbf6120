// Command loadgen drives an MCP server over HTTP for the speed budget of
// DESIGN §11: N concurrent clients (default 64) each send raw JSON-RPC
// tools/call POSTs over keep-alive connections, one after another, for a
// fixed duration or a fixed count, after a warm-up. It then prints calls/s,
// the p50, p90, p99 and max latency and the error count, as text or JSON.
//
// The arguments are a JSON template; every "{n}" in it becomes a number
// unique to the call within this run, and "{run}" a token unique to the run,
// so with the default template every route_item call routes a fresh item
// (authentication, a decision and a durable audit write; never the cached
// answer of a repeat):
//
//	loadgen -url http://127.0.0.1:18953/mcp -demo-keys keys.json \
//	    -tool route_item -args '{"step":"post_tms","item":"BENCH-{run}-{n}"}'
//
// A call counts as an error when the request fails, the status is not 200,
// or the JSON-RPC answer is an error or an isError result.
//
// By default each client sends its next call as soon as the last one is
// answered (closed loop: the run measures the server at saturation). With
// -rate R (or -rate-from FILE -rate-factor F, R = F × that result's calls/s)
// the clients instead share a fixed schedule of R calls/s (open loop, as
// wrk2 does): call k is due at start + k/R, and its latency is measured from
// when it was due, so a server that falls behind is charged for the wait.
//
// -protocol-version 2026-07-28 sends what a client of that version sends
// on every request: the Mcp-Method and Mcp-Name headers and the _meta with
// its protocol version, capabilities and client info.
//
// With -table, loadgen instead reads the JSON results named on the command
// line and prints them as one markdown table, with each server's calls/s as
// a ratio of the first result's (the baseline).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxDuration bounds a run so the generator always stops by itself.
const maxDuration = 10 * time.Minute

// config is what the flags ask for.
type config struct {
	name      string
	url       string
	auth      string
	clients   int
	duration  time.Duration
	count     int64
	warmup    time.Duration
	tool      string
	args      string
	protocol  string
	timeout   time.Duration
	wait      time.Duration
	jsonOut   bool
	maxErrors int
	rate      float64 // calls/s on a fixed schedule; 0: closed loop
}

// Result is one run's outcome, the JSON loadgen emits with -json.
type Result struct {
	Name       string  `json:"name"`
	URL        string  `json:"url"`
	Tool       string  `json:"tool"`
	Clients    int     `json:"clients"`
	Calls      int64   `json:"calls"`
	Errors     int64   `json:"errors"`
	Seconds    float64 `json:"seconds"`
	CallsPerS  float64 `json:"calls_per_s"`
	P50Ms      float64 `json:"p50_ms"`
	P90Ms      float64 `json:"p90_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	FirstError string  `json:"first_error,omitempty"`
	// OfferedRate is the open-loop schedule in calls/s (0: closed loop).
	OfferedRate float64 `json:"offered_rate_per_s,omitempty"`
}

func main() {
	var c config
	var key, demoKeys, workspace string
	table := flag.Bool("table", false, "print the JSON result files given as arguments as a markdown table (the first is the baseline) and exit")
	flag.StringVar(&c.name, "name", "", "label for this run in the output (default: the URL)")
	flag.StringVar(&c.url, "url", "", "the MCP endpoint, e.g. http://127.0.0.1:18953/mcp (loopback only)")
	flag.StringVar(&c.auth, "auth", "", "Authorization header value to send, e.g. 'Bearer ldr_…'")
	flag.StringVar(&key, "key", "", "a key to send as 'Authorization: Bearer KEY'")
	flag.StringVar(&demoKeys, "demo-keys", "", "read the key from this `ladder demo --keys` file (the -workspace agent key)")
	flag.StringVar(&workspace, "workspace", "vantrow-bills", "workspace whose agent key -demo-keys reads")
	flag.IntVar(&c.clients, "clients", 64, "concurrent clients, each on its own keep-alive connection")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "how long to measure (at most 10m); ignored when -n is set")
	flag.Int64Var(&c.count, "n", 0, "if > 0, measure exactly this many calls instead of a duration")
	flag.DurationVar(&c.warmup, "warmup", 2*time.Second, "warm-up before measuring (calls made then are not counted)")
	flag.StringVar(&c.tool, "tool", "noop", "tools/call name")
	flag.StringVar(&c.args, "args", `{"step":"post_tms","item":"BENCH-{run}-{n}"}`, "tools/call arguments, a JSON template: {n} is a per-call number, {run} a per-run token")
	flag.StringVar(&c.protocol, "protocol-version", "2025-06-18", "MCP-Protocol-Version header (empty: none)")
	flag.DurationVar(&c.timeout, "timeout", 10*time.Second, "per-request timeout")
	flag.DurationVar(&c.wait, "wait", 0, "first wait up to this long for the server to accept connections")
	flag.BoolVar(&c.jsonOut, "json", false, "print the result as JSON instead of text")
	flag.IntVar(&c.maxErrors, "print-errors", 3, "print at most this many error details to stderr")
	flag.Float64Var(&c.rate, "rate", 0, "open loop: send this many calls/s in all on a fixed schedule, latency measured from each call's due time (0: closed loop)")
	rateFrom := flag.String("rate-from", "", "open loop at -rate-factor times the calls/s of this JSON result file")
	rateFactor := flag.Float64("rate-factor", 1, "with -rate-from: the factor")
	flag.Parse()

	if *table {
		if err := printTable(os.Stdout, flag.Args()); err != nil {
			fail(err)
		}
		return
	}
	if c.auth == "" && key != "" {
		c.auth = "Bearer " + key
	}
	if c.auth == "" && demoKeys != "" {
		k, err := readDemoKey(demoKeys, workspace)
		if err != nil {
			fail(err)
		}
		c.auth = "Bearer " + k
	}
	if c.name == "" {
		c.name = c.url
	}
	if *rateFrom != "" {
		base, err := readResult(*rateFrom)
		if err != nil {
			fail(err)
		}
		c.rate = *rateFactor * base.CallsPerS
	}
	if err := c.check(); err != nil {
		fail(err)
	}
	res, err := run(context.Background(), c)
	if err != nil {
		fail(err)
	}
	if c.jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
		return
	}
	fmt.Printf("%s: %d calls in %.1fs = %.0f calls/s; p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms; errors %d\n",
		res.Name, res.Calls, res.Seconds, res.CallsPerS, res.P50Ms, res.P90Ms, res.P99Ms, res.MaxMs, res.Errors)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	os.Exit(2)
}

// check refuses a run that would not stop by itself or would leave the
// machine.
func (c config) check() error {
	u, err := url.Parse(c.url)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("-url %q: give an http:// URL", c.url)
	}
	if ip := net.ParseIP(u.Hostname()); (ip == nil || !ip.IsLoopback()) && u.Hostname() != "localhost" {
		return fmt.Errorf("-url %q: the load generator only talks to loopback addresses", c.url)
	}
	if c.clients < 1 {
		return errors.New("-clients must be at least 1")
	}
	if c.rate < 0 || c.rate > 1e6 {
		return fmt.Errorf("-rate %.1f: give calls/s in [0, 1e6] (0: closed loop)", c.rate)
	}
	if c.count <= 0 && (c.duration <= 0 || c.duration > maxDuration) {
		return fmt.Errorf("-duration must be in (0, %s], or set -n", maxDuration)
	}
	if c.warmup < 0 || c.warmup > maxDuration {
		return fmt.Errorf("-warmup must be in [0, %s]", maxDuration)
	}
	probe := strings.NewReplacer("{n}", "0", "{run}", "r").Replace(c.args)
	if !json.Valid([]byte(probe)) {
		return fmt.Errorf("-args is not valid JSON once {n} and {run} are filled in: %s", probe)
	}
	return nil
}

// readDemoKey reads the agent key of workspace from a `ladder demo --keys`
// file.
func readDemoKey(path, workspace string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var keys struct {
		Workspaces map[string]map[string]string `json:"workspaces"`
	}
	if err := json.Unmarshal(data, &keys); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	k := keys.Workspaces[workspace]["agent"]
	if k == "" {
		return "", fmt.Errorf("%s: no agent key for workspace %q", path, workspace)
	}
	return k, nil
}

// bodyTemplate builds request bodies: the JSON-RPC envelope around the
// argument template, split at each {n}.
type bodyTemplate struct {
	parts []string // the body between the {n} holes; the id goes in parts[0]'s hole
}

func newBodyTemplate(tool, args, run, protocol string) bodyTemplate {
	toolJSON, _ := json.Marshal(tool)
	args = strings.ReplaceAll(args, "{run}", run)
	meta := ""
	if protocol >= statelessProtocol {
		versionJSON, _ := json.Marshal(protocol)
		meta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":` + string(versionJSON) +
			`,"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"ladder-loadgen","version":"1.0.0"}}`
	}
	full := `{"jsonrpc":"2.0","id":{n},"method":"tools/call","params":{"name":` + string(toolJSON) + `,"arguments":` + args + meta + `}}`
	return bodyTemplate{parts: strings.Split(full, "{n}")}
}

// statelessProtocol is the first protocol version whose requests carry
// _meta and the Mcp-Method and Mcp-Name headers (SEP-2575).
const statelessProtocol = "2026-07-28"

// append writes the body of call n to dst.
func (t bodyTemplate) append(dst []byte, n int64) []byte {
	for i, p := range t.parts {
		if i > 0 {
			dst = strconv.AppendInt(dst, n, 10)
		}
		dst = append(dst, p...)
	}
	return dst
}

// worker is one client's tally.
type worker struct {
	lat      []time.Duration
	errors   int64
	firstErr string
}

// run waits for the server, warms up, then measures.
func run(ctx context.Context, c config) (Result, error) {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        c.clients,
		MaxIdleConnsPerHost: c.clients,
		MaxConnsPerHost:     c.clients,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: c.timeout}
	if c.wait > 0 {
		if err := waitFor(ctx, c.url, c.wait); err != nil {
			return Result{}, err
		}
	}
	runToken := strconv.FormatInt(time.Now().UnixNano(), 36)
	tmpl := newBodyTemplate(c.tool, c.args, runToken, c.protocol)
	var seq atomic.Int64 // call numbers, unique across warm-up and measurement
	if c.warmup > 0 {
		wctx, cancel := context.WithTimeout(ctx, c.warmup)
		phase(wctx, c, client, tmpl, &seq, nil)
		cancel()
	}
	var (
		mctx   context.Context
		cancel context.CancelFunc
		budget *atomic.Int64
	)
	if c.count > 0 {
		budget = new(atomic.Int64)
		budget.Store(c.count)
		mctx, cancel = context.WithTimeout(ctx, maxDuration)
	} else {
		mctx, cancel = context.WithTimeout(ctx, c.duration)
	}
	start := time.Now()
	workers := phase(mctx, c, client, tmpl, &seq, budget)
	elapsed := time.Since(start)
	cancel()
	return summarize(c, workers, elapsed), nil
}

// phase runs c.clients clients until ctx ends or budget (if not nil) is
// spent, and returns their tallies. With c.rate > 0 the clients share a
// fixed schedule and each latency counts from its call's due time.
func phase(ctx context.Context, c config, client *http.Client, tmpl bodyTemplate, seq *atomic.Int64, budget *atomic.Int64) []*worker {
	workers := make([]*worker, c.clients)
	var (
		wg       sync.WaitGroup
		start    = time.Now()
		due      atomic.Int64 // the next schedule slot
		interval time.Duration
	)
	if c.rate > 0 {
		interval = time.Duration(float64(time.Second) / c.rate)
	}
	for i := range workers {
		w := &worker{lat: make([]time.Duration, 0, 4096)}
		workers[i] = w
		wg.Go(func() {
			var body []byte
			for ctx.Err() == nil {
				if budget != nil && budget.Add(-1) < 0 {
					return
				}
				t0 := time.Now()
				if interval > 0 {
					t0 = start.Add(time.Duration(due.Add(1)-1) * interval)
					if wait := time.Until(t0); wait > 0 {
						select {
						case <-ctx.Done():
							return
						case <-time.After(wait):
						}
					}
				}
				body = tmpl.append(body[:0], seq.Add(1))
				err := call(ctx, client, c, body)
				d := time.Since(t0)
				if err != nil {
					if ctx.Err() != nil && budget == nil {
						return // cut off by the end of the phase: not counted
					}
					w.errors++
					if w.firstErr == "" {
						w.firstErr = err.Error()
					}
					continue
				}
				w.lat = append(w.lat, d)
			}
		})
	}
	wg.Wait()
	return workers
}

// call sends one tools/call and checks the answer.
func call(ctx context.Context, client *http.Client, c config, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.protocol != "" {
		req.Header.Set("MCP-Protocol-Version", c.protocol)
	}
	if c.protocol >= statelessProtocol {
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", c.tool)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, clip(data))
	}
	// A cheap check, so the generator spends its CPU on sending: a JSON-RPC
	// answer has a top-level "result" or "error"; a tool fault is isError.
	if !bytes.Contains(data, []byte(`"result":`)) || bytes.Contains(data, []byte(`"isError":true`)) {
		return fmt.Errorf("JSON-RPC error: %s", clip(data))
	}
	return nil
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// waitFor waits until the server at rawURL accepts TCP connections.
func waitFor(ctx context.Context, rawURL string, limit time.Duration) error {
	u, _ := url.Parse(rawURL)
	deadline := time.Now().Add(limit)
	for {
		conn, err := net.DialTimeout("tcp", u.Host, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not accept connections within %s: %w", u.Host, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// summarize merges the workers' tallies.
func summarize(c config, workers []*worker, elapsed time.Duration) Result {
	var all []time.Duration
	res := Result{Name: c.name, URL: c.url, Tool: c.tool, Clients: c.clients, Seconds: elapsed.Seconds(), OfferedRate: c.rate}
	for _, w := range workers {
		all = append(all, w.lat...)
		res.Errors += w.errors
		if res.FirstError == "" {
			res.FirstError = w.firstErr
		}
	}
	slices.Sort(all)
	res.Calls = int64(len(all))
	if elapsed > 0 {
		res.CallsPerS = float64(res.Calls) / elapsed.Seconds()
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	if n := len(all); n > 0 {
		res.P50Ms = ms(all[quantileIndex(n, 0.50)])
		res.P90Ms = ms(all[quantileIndex(n, 0.90)])
		res.P99Ms = ms(all[quantileIndex(n, 0.99)])
		res.MaxMs = ms(all[n-1])
	}
	if res.Errors > 0 && c.maxErrors > 0 {
		fmt.Fprintf(os.Stderr, "loadgen: %s: %d errors; first: %s\n", c.name, res.Errors, res.FirstError)
	}
	return res
}

// quantileIndex is the nearest-rank index of quantile q in n sorted values.
func quantileIndex(n int, q float64) int {
	i := int(float64(n)*q+0.999999) - 1
	return min(max(i, 0), n-1)
}

// printTable prints the results in files as a markdown table, with calls/s
// as a ratio of the first file's.
func printTable(w io.Writer, files []string) error {
	if len(files) == 0 {
		return errors.New("-table: name the JSON result files, baseline first")
	}
	var results []Result
	for _, f := range files {
		r, err := readResult(f)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	base := results[0].CallsPerS
	fmt.Fprintf(w, "| server | calls/s | p50 ms | p90 ms | p99 ms | max ms | errors | vs %s |\n", results[0].Name)
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		ratio := "–"
		if base > 0 {
			ratio = fmt.Sprintf("%.2f×", r.CallsPerS/base)
		}
		name := r.Name
		if r.OfferedRate > 0 {
			name += fmt.Sprintf(" — open loop, %.0f calls/s offered", r.OfferedRate)
		}
		fmt.Fprintf(w, "| %s | %.0f | %.2f | %.2f | %.2f | %.2f | %d | %s |\n", name, r.CallsPerS, r.P50Ms, r.P90Ms, r.P99Ms, r.MaxMs, r.Errors, ratio)
	}
	return nil
}

// readResult reads one -json result file.
func readResult(path string) (Result, error) {
	var r Result
	data, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

package main

// Secrets (DESIGN.md §8, issue 10): a full demo session through the real
// binary — REST, MCP, capability calls, approvals, reviews, pins, key
// management and the console — and then every output it produced (the
// server's stdout and stderr, /metrics, every response body, `ladder audit
// export`) is searched for every key token and its secret part. Only key
// ids may appear. Secret-shaped strings sent in evidence and notes must come
// back, and be exported, redacted.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Secret-shaped strings an agent or a person puts in evidence and notes.
const (
	secretAPIKey   = "sk-live-4f9aQ7xZ2mB8nC1dE5"
	secretPassword = "hunter2"
)

var secretNote = `{"api_key": "` + secretAPIKey + `"} password=` + secretPassword

// secretSession is a running `ladder demo` whose outputs are kept.
type secretSession struct {
	t        *testing.T
	url      string
	db       string
	stdout   string
	stderr   string
	keys     demoKeys
	bodies   [][]byte // every response body received, except issued tokens
	issued   []string // tokens created during the session
	outcomes []string // what each request was, for failure messages
}

func startSecretDemo(t *testing.T) *secretSession {
	t.Helper()
	bin := ladderBinary(t)
	dir := t.TempDir()
	s := &secretSession{t: t, db: filepath.Join(dir, "demo.db"), stdout: filepath.Join(dir, "stdout.log"), stderr: filepath.Join(dir, "stderr.log")}
	addr := freeAddr(t)
	keysFile := filepath.Join(dir, "keys.json")
	outF, err := os.Create(s.stdout)
	if err != nil {
		t.Fatal(err)
	}
	errF, err := os.Create(s.stderr)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "demo", "--addr", addr, "--keys", keysFile, "--db", s.db, "--gateway", filepath.Join(dir, "gateway.yaml"))
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = outF, errF
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		outF.Close()
		errF.Close()
	}
	t.Cleanup(stop)
	s.url = "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		data, err := os.ReadFile(keysFile)
		if err == nil && json.Unmarshal(data, &s.keys) == nil && s.keys.Admin != "" {
			if resp, err := http.Get(s.url + "/healthz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("demo did not start within 60s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

// do sends a request with a key and keeps the answer.
func (s *secretSession) do(method, path, key string, body any) (int, map[string]any, []byte) {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, _ := json.Marshal(b)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, s.url+path, rd)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	s.bodies = append(s.bodies, raw)
	s.outcomes = append(s.outcomes, fmt.Sprintf("%s %s → %d", method, path, resp.StatusCode))
	return resp.StatusCode, m, raw
}

func (s *secretSession) mustDo(want int, method, path, key string, body any) map[string]any {
	s.t.Helper()
	status, m, raw := s.do(method, path, key, body)
	if status != want {
		s.t.Fatalf("%s %s: %d, want %d: %s", method, path, status, want, raw)
	}
	return m
}

// mcp calls a tool over /mcp.
func (s *secretSession) mcp(key, tool string, args map[string]any) []byte {
	s.t.Helper()
	_, _, raw := s.do("POST", "/mcp", key, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	return raw
}

// createKey makes a key with an admin key; its token is kept as issued,
// and the answer that carries it is the one body not searched.
func (s *secretSession) createKey(admin, ws, kind string) string {
	s.t.Helper()
	status, m, raw := s.do("POST", "/v1/keys", admin, map[string]any{"workspace": ws, "kind": kind, "name": "secrets test"})
	s.bodies = s.bodies[:len(s.bodies)-1]
	tok, _ := m["token"].(string)
	if status != http.StatusCreated || tok == "" {
		s.t.Fatalf("create key: %d %s", status, raw)
	}
	s.issued = append(s.issued, tok)
	return tok
}

var csrfFieldRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// console signs a person in and approves, rejects, reviews and pins
// through the forms.
func (s *secretSession) console(human, approvalID, routeID string) {
	s.t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	keep := func(r *http.Response, err error) []byte {
		if err != nil {
			s.t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		s.bodies = append(s.bodies, b, []byte(fmt.Sprint(r.Header)))
		s.outcomes = append(s.outcomes, fmt.Sprintf("console %s %s → %d", r.Request.Method, r.Request.URL.Path, r.StatusCode))
		return b
	}
	csrf := func(path string) string {
		m := csrfFieldRE.FindSubmatch(keep(c.Get(s.url + path)))
		if m == nil {
			s.t.Fatalf("no csrf on %s", path)
		}
		return string(m[1])
	}
	// A wrong key first: the refusal must not echo it.
	keep(c.PostForm(s.url+"/console/signin", url.Values{"csrf": {csrf("/console/signin")}, "key": {human + "x"}}))
	keep(c.PostForm(s.url+"/console/signin", url.Values{"csrf": {csrf("/console/signin")}, "key": {human}}))
	keep(c.Get(s.url + "/console/inbox"))
	keep(c.Get(s.url + "/console/approvals/" + approvalID))
	keep(c.PostForm(s.url+"/console/approvals/"+approvalID+"/approve", url.Values{"csrf": {csrf("/console/inbox")}, "reason": {"checked; " + secretNote}}))
	keep(c.Get(s.url + "/console/routes/" + routeID))
	keep(c.PostForm(s.url+"/console/routes/"+routeID+"/review", url.Values{"csrf": {csrf("/console/inbox")}, "verdict": {"agree"}, "note": {secretNote}}))
	keep(c.Get(s.url + "/console/steps"))
	keep(c.Get(s.url + "/console/steps/bills/check_accessorials"))
	keep(c.Get(s.url + "/console/gate"))
	keep(c.Get(s.url + "/console/audit"))
	keep(c.PostForm(s.url+"/console/signout", url.Values{"csrf": {csrf("/console/inbox")}}))
}

func TestSecretsNeverLeak(t *testing.T) {
	s := startSecretDemo(t)
	const ws = "vantrow-bills"
	admin := s.createKey(s.keys.Admin, ws, "admin")
	agent := s.createKey(admin, ws, "agent")
	human := s.createKey(admin, ws, "human")
	partner := s.createKey(s.keys.Admin, "partner-programs", "agent")
	doomed := s.createKey(admin, ws, "agent")

	// REST: the ladder.
	s.mustDo(200, "GET", "/v1/steps", agent, nil)
	s.mustDo(200, "GET", "/v1/steps/bills/post_tms/evidence", human, nil)
	var routeID string
	for i := 0; i < 500 && routeID == ""; i++ {
		m := s.mustDo(200, "POST", "/v1/route", agent, map[string]any{"step": "check_accessorials", "item": fmt.Sprintf("BILL-SECRET-%03d", i),
			"features": map[string]any{"carrier": "Acme"}})
		if m["decision"] != "act_alone" {
			routeID, _ = m["route_id"].(string)
		}
	}
	if routeID == "" {
		t.Fatal("no route needed a person")
	}
	rt := s.mustDo(200, "POST", "/v1/route", agent, map[string]any{"step": "read_bill", "item": "BILL-SECRET-R"})
	s.mustDo(201, "POST", "/v1/routes/"+rt["route_id"].(string)+"/review", human, map[string]any{"verdict": "disagree", "severity": 3, "note": "wrong total; " + secretNote})
	s.mustDo(201, "POST", "/v1/outcomes", agent, map[string]any{"step": "read_bill", "item": "BILL-SECRET-R", "handled_by": "agent", "ok": true})
	s.mustDo(200, "POST", "/v1/steps/bills/match_load/pin", human, map[string]any{"lane": "shadow", "reason": "audit " + secretNote})
	s.mustDo(200, "POST", "/v1/steps/bills/match_load/unpin", human, map[string]any{"reason": "done " + secretNote})

	// REST: the gate, with secrets in the evidence note.
	evidence := map[string]any{"bill_id": "BILL-SECRET-G", "pod_received": true, "invoice_matches_rate_con": true, "carrier_docs_verified": true,
		"dispute_open": false, "hold_reason_cleared_before_release": true, "note": secretNote}
	s.mustDo(200, "GET", "/v1/gate/functions", agent, nil)
	s.mustDo(200, "POST", "/v1/gate/authorize", agent, map[string]any{"case": "release_payment", "precondition_fn": "score_release_hold", "evidence": evidence})
	s.mustDo(200, "GET", "/v1/gate/history", human, nil)

	// REST: capabilities and approvals.
	ap := s.mustDo(202, "POST", "/v1/capabilities/rates:approveRate/call", agent, map[string]any{"bill_id": "BILL-SECRET-A", "linehaul_usd": 1850.0, "fuel_surcharge_usd": 212.5, "idempotency_key": "secret-1"})
	ap2 := s.mustDo(202, "POST", "/v1/capabilities/rates:approveRate/call", agent, map[string]any{"bill_id": "BILL-SECRET-B", "linehaul_usd": 1850.0, "fuel_surcharge_usd": 212.5, "idempotency_key": "secret-2"})
	ap3 := s.mustDo(202, "POST", "/v1/capabilities/rates:approveRate/call", agent, map[string]any{"bill_id": "BILL-SECRET-C", "linehaul_usd": 1850.0, "fuel_surcharge_usd": 212.5, "idempotency_key": "secret-3"})
	s.do("POST", "/v1/capabilities/payments:releaseHold/call", agent, map[string]any{"payload": map[string]any{"bill_id": "BILL-SECRET-G"}, "evidence": evidence, "idempotency_key": "secret-h"})
	s.mustDo(200, "GET", "/v1/approvals", human, nil)
	s.mustDo(200, "GET", "/v1/approvals/"+ap["approval_id"].(string), agent, nil)
	s.mustDo(200, "POST", "/v1/approvals/"+ap["approval_id"].(string)+"/approve", human, map[string]any{"reason": "ok " + secretNote})
	s.mustDo(200, "POST", "/v1/approvals/"+ap2["approval_id"].(string)+"/reject", human, map[string]any{"reason": "no " + secretNote})
	s.do("POST", "/v1/approvals/"+ap["approval_id"].(string)+"/retry", human, nil)

	// MCP.
	s.mcp(agent, "which_steps_run_alone", map[string]any{})
	s.mcp(agent, "step_evidence", map[string]any{"step": "post_tms"})
	s.mcp(agent, "route_item", map[string]any{"step": "post_tms", "item": "BILL-SECRET-M"})
	s.mcp(agent, "list_precondition_functions", map[string]any{})
	if raw := s.mcp(agent, "authorize", map[string]any{"case": "release_payment", "precondition_fn": "score_release_hold", "evidence": evidence}); !bytes.Contains(raw, []byte("gate_state")) {
		t.Fatalf("authorize over MCP: %s", raw)
	}
	s.mcp(agent, "gate_history_get", map[string]any{})
	s.mcp(agent, "rates:approveRate", map[string]any{"bill_id": "BILL-SECRET-D", "linehaul_usd": 1.0, "fuel_surcharge_usd": 1.0, "idempotency_key": "secret-4"})
	s.mcp(agent, "approval_status", map[string]any{"approval_id": ap2["approval_id"]})
	s.mcp(partner, "ticket6:readLedger", map[string]any{"program": "partner-2027", "relationship": "relationship:partner-2027:creator-1", "payload": map[string]any{}})
	s.mcp(partner, "ticket6:approveCommission", map[string]any{"program": "partner-2027", "relationship": "relationship:partner-2027:creator-1", "payload": map[string]any{"commission_id": "c-1"}})

	// Refusals that see a key: wrong kinds, a wrong secret, a revoked key.
	s.do("POST", "/mcp", human, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
	s.do("POST", "/v1/approvals/"+ap3["approval_id"].(string)+"/approve", agent, nil)
	id, _, _ := strings.Cut(strings.TrimPrefix(agent, "ldr_"), "_")
	wrong := "ldr_" + id + "_" + strings.Repeat("A", len(agent)-len(id)-5)
	s.do("GET", "/v1/steps", wrong, nil)
	s.do("POST", "/mcp", wrong, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
	s.mustDo(200, "GET", "/v1/keys", admin, nil)
	s.mustDo(200, "POST", "/v1/keys/"+keyIDOf(doomed)+"/revoke", admin, nil)
	s.do("GET", "/v1/steps", doomed, nil)
	s.do("POST", "/mcp", doomed, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
	s.do("POST", "/v1/route", agent, []byte(`{"step": "post_tms", "item": "x", "ITEM": "y"}`))
	s.do("GET", "/v1/nothing?key="+url.QueryEscape(agent), agent, nil)

	// The console.
	s.console(human, ap3["approval_id"].(string), routeID)

	// Metrics.
	s.do("GET", "/metrics", "", nil)
	s.do("GET", "/readyz", "", nil)
	time.Sleep(100 * time.Millisecond) // let the access log flush

	export, err := exec.Command(ladderBinary(t), "audit", "export", "--db", s.db).CombinedOutput()
	if err != nil {
		t.Fatalf("audit export: %v\n%s", err, export)
	}
	if !bytes.Contains(export, []byte("approval")) || !bytes.Contains(export, []byte("BILL-SECRET-A")) {
		t.Fatalf("audit export lacks the session: %.500s", export)
	}
	stdout, _ := os.ReadFile(s.stdout)
	stderr, _ := os.ReadFile(s.stderr)
	// The demo prints its own keys once in its start-up banner (that is
	// its job); everything it writes after the banner is searched for them.
	banner := []byte("Press Ctrl-C to stop.")
	afterBanner := stdout
	if i := bytes.Index(stdout, banner); i >= 0 {
		afterBanner = stdout[i+len(banner):]
	} else {
		t.Fatalf("no banner on stdout: %s", stdout)
	}
	if !bytes.Contains(stderr, []byte(keyIDOf(agent))) && !bytes.Contains(afterBanner, []byte(keyIDOf(agent))) {
		t.Logf("note: the server log does not name the agent key id")
	}

	outputs := map[string][]byte{
		"server stdout (whole)":         stdout,
		"server stdout after banner":    afterBanner,
		"server stderr":                 stderr,
		"ladder audit export":           export,
		"response bodies and headers":   bytes.Join(s.bodies, []byte("\n")),
		"stdout+stderr+export+response": nil,
	}
	outputs["stdout+stderr+export+response"] = bytes.Join([][]byte{afterBanner, stderr, export, outputs["response bodies and headers"]}, []byte("\n"))

	// Every token: those issued in the session everywhere; the demo's own
	// everywhere but the banner.
	type tok struct {
		token, where string
	}
	var toks []tok
	for _, k := range append(s.issued, wrong) {
		toks = append(toks, tok{k, "server stdout (whole)"})
	}
	toks = append(toks, tok{s.keys.Admin, ""})
	for _, byKind := range s.keys.Workspaces {
		for _, k := range byKind {
			toks = append(toks, tok{k, ""})
		}
	}
	for _, k := range toks {
		secret := k.token[strings.LastIndexByte(k.token, '_')+1:]
		for name, out := range outputs {
			if name == "server stdout (whole)" && k.where == "" {
				continue
			}
			for _, needle := range []string{k.token, secret} {
				if i := bytes.Index(out, []byte(needle)); i >= 0 {
					t.Errorf("%s holds a key's secret %q…: %q", name, needle[:min(len(needle), 12)], out[max(i-200, 0):min(i+100, len(out))])
				}
			}
		}
	}

	// Secret-shaped strings in evidence and notes come back and are
	// exported redacted.
	for _, name := range []string{"ladder audit export", "response bodies and headers", "server stderr", "server stdout after banner"} {
		for _, needle := range []string{secretAPIKey, secretPassword} {
			out := outputs[name]
			for off := 0; ; {
				i := bytes.Index(out[off:], []byte(needle))
				if i < 0 {
					break
				}
				i += off
				t.Errorf("%s holds the secret-shaped %q unredacted: …%s…", name, needle, out[max(i-160, 0):min(i+40, len(out))])
				off = i + len(needle)
			}
		}
	}
	if !bytes.Contains(export, []byte("REDACTED")) && !bytes.Contains(export, []byte("redacted")) {
		t.Errorf("the audit export shows no redaction marker")
	}
	if t.Failed() {
		t.Logf("requests: %s", strings.Join(s.outcomes, "; "))
	}
}

func keyIDOf(token string) string {
	id, _, _ := strings.Cut(strings.TrimPrefix(token, "ldr_"), "_")
	return id
}

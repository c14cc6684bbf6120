package main

// Several `ladder serve` replicas on one PostgreSQL database (DESIGN.md §7,
// issue 7), and one replica whose database goes away and comes back. Both
// tests run the real binary and need LADDER_TEST_POSTGRES; without it they
// skip.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/internal/testenv"
)

// postgresDSN returns LADDER_TEST_POSTGRES or skips the test.
func postgresDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("LADDER_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("LADDER_TEST_POSTGRES is unset: this test runs `ladder serve` on PostgreSQL; set it to a DSN such as postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	return dsn
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// pgExec runs statements on dsn, each in its own round trip.
func pgExec(t *testing.T, dsn string, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to %s: %v", redactDSN(dsn), err)
	}
	defer conn.Close(context.Background())
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(dsn)"
	}
	return u.Redacted()
}

// freshSchema creates nothing (ladder creates the schema on start) but
// picks a schema name no other run uses and drops it when the test ends.
func freshSchema(t *testing.T, dsn string) string {
	t.Helper()
	schema := "ladder_replicas_" + randHex(6)
	t.Cleanup(func() { pgExec(t, dsn, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
	return schema
}

// withDatabase returns dsn with its database replaced by db.
func withDatabase(t *testing.T, dsn, db string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Skipf("LADDER_TEST_POSTGRES must be a postgres:// URL for this test")
	}
	u.Path = "/" + db
	return u.String()
}

// serveProcess is a running `ladder serve`.
type serveProcess struct {
	Name string
	URL  string
	cmd  *exec.Cmd
	log  *testenv.Buffer
}

// startServe starts `ladder serve --config cfg --db db` on a free loopback
// port with env added to the environment, and waits until /healthz
// answers. It is stopped (interrupt, then kill) when the test ends; its
// log is printed if the test failed.
func startServe(t *testing.T, name, cfg, db string, env ...string) *serveProcess {
	t.Helper()
	p, err := launchServe(t, ladderBinary(t), name, cfg, db, env...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// launchServe is startServe without t.Fatal, so that several replicas can
// start at once from goroutines of their own.
func launchServe(t *testing.T, bin, name, cfg, db string, env ...string) (*serveProcess, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "serve", "--unsigned-audit", "--config", cfg, "--db", db, "--addr", addr)
	cmd.Env = append(os.Environ(), env...)
	p := &serveProcess{Name: name, URL: "http://" + addr, cmd: cmd, log: &testenv.Buffer{}}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("log of replica %s:\n%s", name, tail(p.log.String(), 60))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			return nil, fmt.Errorf("replica %s exited before answering: %v\n%s", name, cmd.ProcessState, p.log.String())
		default:
		}
		resp, err := http.Get(p.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("replica %s did not answer /healthz within 30s\n%s", name, p.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// replicaClient keeps connections alive across many concurrent calls.
var replicaClient = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxConnsPerHost: 128, IdleConnTimeout: 30 * time.Second},
}

// reply is an HTTP answer: its status, its body, and the refusal code of an
// error body.
type reply struct {
	Status int
	Body   []byte
	Code   string
}

func (r reply) String() string { return fmt.Sprintf("HTTP %d %s", r.Status, bytes.TrimSpace(r.Body)) }

// call sends a JSON request with a bearer key. A transport error is
// returned as status 0.
func call(method, url, key string, body any) reply {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return reply{Body: []byte(err.Error())}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return reply{Body: []byte(err.Error())}
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := replicaClient.Do(req)
	if err != nil {
		return reply{Body: []byte(err.Error())}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{Status: resp.StatusCode, Body: b}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil {
		r.Code = e.Error.Code
	}
	return r
}

// mustCall is call that fails the test unless the status is want.
func mustCall(t *testing.T, want int, method, url, key string, body, out any) {
	t.Helper()
	r := call(method, url, key, body)
	if r.Status != want {
		t.Fatalf("%s %s: want HTTP %d, got %s", method, url, want, r)
	}
	if out != nil {
		if err := json.Unmarshal(r.Body, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, r.Body)
		}
	}
}

// createKey makes a key through a replica's REST API and returns its id
// and token.
func createKey(t *testing.T, p *serveProcess, admin, workspace string, kind ladder.KeyKind) (id, token string) {
	t.Helper()
	var k struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	mustCall(t, http.StatusCreated, "POST", p.URL+"/v1/keys", admin, map[string]string{"workspace": workspace, "kind": string(kind), "name": "replicas test " + string(kind)}, &k)
	if k.ID == "" || k.Token == "" {
		t.Fatalf("POST /v1/keys answered no id or token")
	}
	return k.ID, k.Token
}

// routeReply is the part of a route answer the tests read.
type routeReply struct {
	RouteID string      `json:"route_id"`
	Lane    ladder.Lane `json:"lane"`
	Item    string      `json:"item"`
}

// reviewReply is the part of a review answer the tests read.
type reviewReply struct {
	Review struct {
		ID string `json:"review_id"`
	} `json:"review"`
	Lane       ladder.Lane        `json:"lane"`
	LaneChange *ladder.LaneChange `json:"lane_change"`
}

// auditExport runs `ladder audit export` (and, with verify, `ladder audit
// verify` first, failing the test unless the chain is intact) against a
// PostgreSQL database and returns its records.
func auditExport(t *testing.T, db string, verify bool, env ...string) []ladder.AuditRecord {
	t.Helper()
	bin := ladderBinary(t)
	if verify {
		cmd := exec.Command(bin, "audit", "verify", "--db", db)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "audit chain intact") {
			t.Fatalf("ladder audit verify: %v\n%s", err, out)
		}
		t.Logf("ladder audit verify: %s", strings.TrimSpace(lastLine(string(out))))
	}
	cmd := exec.Command(bin, "audit", "export", "--db", db)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ladder audit export: %v\n%s", err, stderr.String())
	}
	var recs []ladder.AuditRecord
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var r ladder.AuditRecord
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("audit export: %v", err)
		}
		recs = append(recs, r)
	}
	return recs
}

func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return ls[len(ls)-1]
}

// countSubjects counts the audit records of one kind by subject.
func countSubjects(recs []ladder.AuditRecord, kind string) map[string]int {
	n := map[string]int{}
	for _, r := range recs {
		if r.Kind == kind {
			n[r.Subject]++
		}
	}
	return n
}

// stepRecords returns the audit records whose data names the step.
func stepRecords(recs []ladder.AuditRecord, queue, step string) []ladder.AuditRecord {
	var out []ladder.AuditRecord
	for _, r := range recs {
		var d struct {
			Queue string `json:"queue"`
			Step  string `json:"step"`
		}
		if json.Unmarshal(r.Data, &d) == nil && d.Queue == queue && d.Step == step {
			out = append(out, r)
		}
	}
	return out
}

// replicaConfig writes the demo configuration with lane rules on
// check_accessorials (shadow, class B) low enough for a test to earn its
// promotion: 30 agreeing reviews move it to propose (Wilson lower bound of
// 30/30 is 0.886 ≥ 0.8) and nothing else can move it (propose → auto needs
// four weeks in propose).
//
// rewrite replaces text of the demo config, old → new, each exactly once
// (an executor URL pointed at a test upstream, for instance).
func replicaConfig(t *testing.T, rewrite map[string]string) string {
	t.Helper()
	demo := string(config.Demo())
	const anchor = "          - id: check_accessorials\n"
	rewrite[anchor] = anchor + "            rules: {propose_min_weeks: 0, propose_min_n: 30, propose_lower: 0.8}\n"
	// One key drives both replicas concurrently: lift the per-key rate limit.
	rewrite["    per_second: 20000\n    burst: 40000\n"] = "    per_second: 100000\n    burst: 100000\n"
	for old, new := range rewrite {
		if strings.Count(demo, old) != 1 {
			t.Fatalf("the demo config does not hold %q exactly once", old)
		}
		demo = strings.Replace(demo, old, new, 1)
	}
	path := filepath.Join(t.TempDir(), "ladder.yaml")
	if err := os.WriteFile(path, []byte(demo), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path); err != nil {
		t.Fatalf("test config: %v", err)
	}
	return path
}

// replicaOp is one kind of work the replica test drives through both
// replicas, alternating, many at a time. run does the i-th call, with a and
// b the replicas to use (they swap from call to call) and records what was
// acknowledged in h; check then proves that the stored history holds each
// acknowledged effect exactly once.
//
// Rows: routes with their reviews (one lane change), and capability calls
// that become approvals, each approved through both replicas at once
// (executed once). Further kinds of call join this table as rows.
type replicaOp struct {
	name  string
	count int
	run   func(t *testing.T, i int, a, b *serveProcess, h *history) error
	check func(t *testing.T, h *history, recs []ladder.AuditRecord)
}

// history is what the replicas acknowledged.
type history struct {
	mu          sync.Mutex
	routes      map[string]string // route id → item
	reviews     map[string]string // review id → route id
	laneChanges []ladder.LaneChange
	approvals   map[string]int // approval id → approvals answered 200
	bills       []string       // the approved calls' bill ids
}

func (h *history) add(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f()
}

// replicaOps are the operations of TestReplicas. They share the agent and
// human keys of the workspace.
func replicaOps(agent, human string, up *countingUpstream) []replicaOp {
	const queue, step = "bills", "check_accessorials"
	return []replicaOp{{
		name:  "route then review (shadow → propose after 30)",
		count: 120,
		run: func(t *testing.T, i int, a, b *serveProcess, h *history) error {
			item := fmt.Sprintf("CA-%04d", i)
			r := call("POST", a.URL+"/v1/route", agent, map[string]string{"queue": queue, "step": step, "item": item})
			if r.Status != http.StatusOK {
				return fmt.Errorf("route %s on %s: %s", item, a.Name, r)
			}
			var rt routeReply
			if err := json.Unmarshal(r.Body, &rt); err != nil {
				return err
			}
			h.add(func() { h.routes[rt.RouteID] = item })
			r = call("POST", b.URL+"/v1/routes/"+rt.RouteID+"/review", human, map[string]string{"verdict": "agree"})
			if r.Status != http.StatusCreated {
				return fmt.Errorf("review %s on %s: %s", rt.RouteID, b.Name, r)
			}
			var rv reviewReply
			if err := json.Unmarshal(r.Body, &rv); err != nil {
				return err
			}
			h.add(func() {
				h.reviews[rv.Review.ID] = rt.RouteID
				if rv.LaneChange != nil {
					h.laneChanges = append(h.laneChanges, *rv.LaneChange)
				}
			})
			return nil
		},
		check: func(t *testing.T, h *history, recs []ladder.AuditRecord) {
			// Approvals count as reviews of their own steps; this row is
			// about check_accessorials.
			mine := stepRecords(recs, queue, step)
			routes, reviews, changes := countSubjects(recs, ladder.AuditRoute), countSubjects(mine, ladder.AuditReview), countSubjects(mine, ladder.AuditLaneChange)
			for id := range h.routes {
				if routes[id] != 1 {
					t.Errorf("acknowledged route %s is in the audit log %d times", id, routes[id])
				}
			}
			for id := range h.reviews {
				if reviews[id] != 1 {
					t.Errorf("acknowledged review %s is in the audit log %d times", id, reviews[id])
				}
			}
			if len(reviews) != len(h.reviews) {
				t.Errorf("audit log holds %d reviews of %s; %d were acknowledged", len(reviews), step, len(h.reviews))
			}
			if len(h.laneChanges) != 1 {
				t.Fatalf("want exactly one lane change acknowledged across both replicas, got %d: %+v", len(h.laneChanges), h.laneChanges)
			}
			lc := h.laneChanges[0]
			if lc.From != ladder.LaneShadow || lc.To != ladder.LanePropose || lc.Step != step {
				t.Errorf("lane change %+v; want %s shadow → propose", lc, step)
			}
			if len(changes) != 1 || changes[lc.ID] != 1 {
				t.Errorf("audit log lane changes %v; want exactly %s once", changes, lc.ID)
			}
		},
	}, {
		name:  "capability call → approval, approved through both replicas at once",
		count: 24,
		run: func(t *testing.T, i int, a, b *serveProcess, h *history) error {
			bill := fmt.Sprintf("AP-%04d", i)
			r := call("POST", a.URL+"/v1/capabilities/rates:approveRate/call", agent, map[string]any{
				"bill_id": bill, "linehaul_usd": 1200, "fuel_surcharge_usd": 80, "idempotency_key": bill})
			if r.Status != http.StatusAccepted {
				return fmt.Errorf("call rates:approveRate on %s: want 202 approval_requested, got %s", a.Name, r)
			}
			var res struct {
				ApprovalID string `json:"approval_id"`
				RouteID    string `json:"route_id"`
			}
			if err := json.Unmarshal(r.Body, &res); err != nil || res.ApprovalID == "" {
				return fmt.Errorf("call rates:approveRate: no approval id in %s", r)
			}
			if res.RouteID != "" { // a step-tied call is routed, and logged as a route
				h.add(func() { h.routes[res.RouteID] = bill })
			}
			var wg sync.WaitGroup
			var answers [2]reply
			for j, p := range []*serveProcess{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					answers[j] = call("POST", p.URL+"/v1/approvals/"+res.ApprovalID+"/approve", human, map[string]string{"reason": "replica test"})
				}()
			}
			wg.Wait()
			ok := 0
			for _, ans := range answers {
				switch {
				case ans.Status == http.StatusOK:
					ok++
				case ans.Status == 0 || ans.Status >= 500:
					return fmt.Errorf("approve %s: %s", res.ApprovalID, ans)
				}
			}
			h.add(func() { h.approvals[res.ApprovalID] = ok; h.bills = append(h.bills, bill) })
			return nil
		},
		check: func(t *testing.T, h *history, recs []ladder.AuditRecord) {
			for id, ok := range h.approvals {
				if ok != 1 {
					t.Errorf("approval %s: %d of two concurrent approvals answered 200; want exactly 1", id, ok)
				}
			}
			for _, bill := range h.bills {
				if n := up.count(bill); n != 1 {
					t.Errorf("the upstream executed the approved call of %s %d times; want once", bill, n)
				}
			}
			if n, want := up.total(), len(h.bills); n != want {
				t.Errorf("the upstream ran %d calls; %d approvals were made", n, want)
			}
		},
	}}
}

// countingUpstream is a capability executor that counts its calls by the
// payload's bill_id.
type countingUpstream struct {
	*httptest.Server
	mu sync.Mutex
	n  map[string]int
}

func newCountingUpstream(t *testing.T) *countingUpstream {
	u := &countingUpstream{n: map[string]int{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Payload struct {
				BillID string `json:"bill_id"`
			} `json:"payload"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		u.mu.Lock()
		u.n[req.Payload.BillID]++
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"approved":true}`)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *countingUpstream) count(key string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.n[key]
}

func (u *countingUpstream) total() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, c := range u.n {
		n += c
	}
	return n
}

// TestReplicas starts two `ladder serve` processes on one PostgreSQL
// schema and drives routes and reviews through both, alternating and
// concurrently; then checks one consistent history (every acknowledged
// route and review stored once, exactly one lane change, the audit chain
// intact) and that a pin and a key revocation made through one replica are
// honoured by the other within one second.
func TestReplicas(t *testing.T) {
	dsn := postgresDSN(t)
	schema := freshSchema(t, dsn)
	up := newCountingUpstream(t)
	cfg := replicaConfig(t, map[string]string{"url: demo:rates\n": "url: " + up.URL + "/rates\n"})
	_, adminToken, _ := ladder.NewKeyToken()
	env := []string{"LADDER_PG_SCHEMA=" + schema, "LADDER_ADMIN_KEY=" + adminToken, "LADDER_AUDIT_SECRET=replicas-test"}

	// A starts first and bootstraps the admin key on the empty schema; B
	// starts once A answers. (Started at the same instant with one
	// LADDER_ADMIN_KEY, both replicas can find no key and both insert it;
	// the loser exits on the duplicate key. See docs/operations.md.)
	bin := ladderBinary(t)
	var reps [2]*serveProcess
	for i, name := range []string{"A", "B"} {
		p, err := launchServe(t, bin, name, cfg, dsn, env...)
		if err != nil {
			t.Fatal(err)
		}
		reps[i] = p
	}
	a, b := reps[0], reps[1]
	for _, p := range reps {
		mustCall(t, http.StatusOK, "GET", p.URL+"/readyz", "", nil, nil)
	}

	const ws = "vantrow-bills"
	_, agent := createKey(t, a, adminToken, ws, ladder.KeyAgent)
	_, human := createKey(t, b, adminToken, ws, ladder.KeyHuman)

	h := &history{routes: map[string]string{}, reviews: map[string]string{}, approvals: map[string]int{}}
	ops := replicaOps(agent, human, up)
	t.Run("alternating and concurrent", func(t *testing.T) {
		start := time.Now()
		sem := make(chan struct{}, 32)
		errs := make(chan error, 1024)
		var wg sync.WaitGroup
		calls := 0
		for _, op := range ops {
			for i := range op.count {
				x, y := a, b
				if i%2 == 1 {
					x, y = b, a
				}
				wg.Add(1)
				calls++
				go func() {
					defer wg.Done()
					sem <- struct{}{}
					defer func() { <-sem }()
					if err := op.run(t, i, x, y, h); err != nil {
						errs <- fmt.Errorf("%s #%d: %w", op.name, i, err)
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if t.Failed() {
			t.FailNow()
		}
		t.Logf("%d operations through both replicas in %s", calls, time.Since(start).Round(time.Millisecond))
	})

	t.Run("same item through both replicas routes once", func(t *testing.T) {
		const n = 20
		var wg sync.WaitGroup
		ids := make([][2]string, n)
		for i := range n {
			for j, p := range reps {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := call("POST", p.URL+"/v1/route", agent, map[string]string{"queue": "bills", "step": "read_bill", "item": fmt.Sprintf("RB-%d", i)})
					var rt routeReply
					if r.Status != http.StatusOK || json.Unmarshal(r.Body, &rt) != nil {
						t.Errorf("route RB-%d on %s: %s", i, p.Name, r)
						return
					}
					ids[i][j] = rt.RouteID
				}()
			}
		}
		wg.Wait()
		for i, pair := range ids {
			if pair[0] != pair[1] {
				t.Errorf("item RB-%d: replica A answered route %s, B answered %s; want one route", i, pair[0], pair[1])
			}
			h.add(func() { h.routes[pair[0]] = fmt.Sprintf("RB-%d", i) })
		}
	})

	t.Run("one consistent history", func(t *testing.T) {
		recs := auditExport(t, dsn, true, env...)
		for _, op := range ops {
			op.check(t, h, recs)
		}
		if n := countSubjects(recs, ladder.AuditKeyCreate); len(n) != 3 {
			t.Errorf("want 3 key.create records (bootstrap admin, agent, human), got %d: %v", len(n), n)
		}
		if n, want := len(countSubjects(recs, ladder.AuditRoute)), len(h.routes); n != want {
			t.Errorf("audit log holds %d routes; %d were acknowledged", n, want)
		}
		// Both replicas read the same state.
		for _, p := range reps {
			var pack struct {
				Lane        ladder.Lane         `json:"lane"`
				LaneChanges []ladder.LaneChange `json:"lane_changes"`
			}
			mustCall(t, http.StatusOK, "GET", p.URL+"/v1/steps/bills/check_accessorials/evidence", human, nil, &pack)
			if pack.Lane != ladder.LanePropose || len(pack.LaneChanges) != 1 {
				t.Errorf("replica %s: check_accessorials in %s with %d lane changes; want propose with 1", p.Name, pack.Lane, len(pack.LaneChanges))
			}
		}
	})

	t.Run("pin through A is honoured by B", func(t *testing.T) {
		route := func(p *serveProcess, item string) ladder.Lane {
			var rt routeReply
			mustCall(t, http.StatusOK, "POST", p.URL+"/v1/route", agent, map[string]string{"queue": "bills", "step": "decide_hold", "item": item}, &rt)
			return rt.Lane
		}
		if lane := route(b, "DH-before"); lane != ladder.LaneShadow {
			t.Fatalf("decide_hold routes in %s before the pin; want shadow", lane)
		}
		mustCall(t, http.StatusOK, "POST", a.URL+"/v1/steps/bills/decide_hold/pin", human, map[string]string{"lane": "human_only", "reason": "replica test: hold every hold decision for a person"}, nil)
		pinned := time.Now()
		for i := 0; ; i++ {
			if lane := route(b, fmt.Sprintf("DH-after-%d", i)); lane == ladder.LaneHumanOnly {
				t.Logf("replica B routed in the pinned lane %s after the pin on A (attempt %d)", time.Since(pinned).Round(time.Microsecond), i+1)
				break
			}
			if time.Since(pinned) > time.Second {
				t.Fatalf("replica B still routes decide_hold outside human_only 1s after the pin on A")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	t.Run("revocation through A is honoured by B", func(t *testing.T) {
		id, tok := createKey(t, a, adminToken, ws, ladder.KeyAgent)
		body := map[string]string{"queue": "bills", "step": "read_bill", "item": "RV-before"}
		mustCall(t, http.StatusOK, "POST", b.URL+"/v1/route", tok, body, nil)
		mustCall(t, http.StatusOK, "POST", a.URL+"/v1/keys/"+id+"/revoke", adminToken, nil, nil)
		revoked := time.Now()
		for i := 0; ; i++ {
			r := call("POST", b.URL+"/v1/route", tok, map[string]string{"queue": "bills", "step": "read_bill", "item": fmt.Sprintf("RV-after-%d", i)})
			if r.Status == http.StatusUnauthorized && r.Code == string(ladder.CodeKeyInvalid) {
				t.Logf("replica B refused the key %s after its revocation on A (attempt %d)", time.Since(revoked).Round(time.Microsecond), i+1)
				break
			}
			if r.Status != http.StatusOK {
				t.Fatalf("route with the key being revoked: %s", r)
			}
			if time.Since(revoked) > time.Second {
				t.Fatalf("replica B still accepts key %s 1s after its revocation on A", id)
			}
			time.Sleep(10 * time.Millisecond)
		}
		// The refused call recorded nothing.
		recs := auditExport(t, dsn, true, env...)
		for _, r := range recs {
			if r.Kind == ladder.AuditRoute && strings.Contains(string(r.Data), `"RV-after-`) && r.Actor == id {
				var d struct {
					Item string `json:"item"`
				}
				json.Unmarshal(r.Data, &d)
				t.Errorf("a route of the revoked key was recorded: %s", d.Item)
			}
		}
	})
}

// TestReplicaDatabaseDown cuts one replica off its database, sees every
// call refused with AUDIT_UNAVAILABLE and nothing recorded, /readyz 503;
// then restores the database and sees the replica resume by itself.
func TestReplicaDatabaseDown(t *testing.T) {
	dsn := postgresDSN(t)
	dbName := "ladder_down_" + randHex(5)
	db := withDatabase(t, dsn, dbName)
	pgExec(t, dsn, "CREATE DATABASE "+dbName)
	t.Cleanup(func() {
		pgExec(t, dsn, "ALTER DATABASE "+dbName+" ALLOW_CONNECTIONS true", "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)")
	})
	cfg := replicaConfig(t, map[string]string{})
	_, adminToken, _ := ladder.NewKeyToken()
	env := []string{"LADDER_ADMIN_KEY=" + adminToken, "LADDER_AUDIT_SECRET=down-test"}
	p := startServe(t, "down", cfg, db, env...)
	_, agent := createKey(t, p, adminToken, "vantrow-bills", ladder.KeyAgent)
	_, human := createKey(t, p, adminToken, "vantrow-bills", ladder.KeyHuman)
	route := func(item string) reply {
		return call("POST", p.URL+"/v1/route", agent, map[string]string{"queue": "bills", "step": "post_tms", "item": item})
	}
	var before routeReply
	mustCall(t, http.StatusOK, "POST", p.URL+"/v1/route", agent, map[string]string{"queue": "bills", "step": "post_tms", "item": "UP-1"}, &before)

	terminate := "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" + dbName + "' AND pid <> pg_backend_pid()"
	refused := map[string]bool{} // items whose route was refused

	// expectDown checks that every kind of call is refused with
	// AUDIT_UNAVAILABLE (HTTP 503), promptly, and /readyz is 503.
	expectDown := func(t *testing.T, prefix string) {
		for i := range 5 {
			item := fmt.Sprintf("%s-%d", prefix, i)
			start := time.Now()
			r := route(item)
			if r.Status != http.StatusServiceUnavailable || r.Code != string(ladder.CodeAuditUnavailable) {
				t.Fatalf("route while the database is down: want 503 AUDIT_UNAVAILABLE, got %s", r)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("refusal took %s; want it prompt", d)
			}
			refused[item] = true
		}
		if r := call("POST", p.URL+"/v1/routes/"+before.RouteID+"/review", human, map[string]string{"verdict": "agree"}); r.Status != http.StatusServiceUnavailable || r.Code != string(ladder.CodeAuditUnavailable) {
			t.Errorf("review while the database is down: want 503 AUDIT_UNAVAILABLE, got %s", r)
		}
		if r := call("POST", p.URL+"/v1/steps/bills/decide_hold/pin", human, map[string]string{"lane": "human_only", "reason": "down"}); r.Status != http.StatusServiceUnavailable || r.Code != string(ladder.CodeAuditUnavailable) {
			t.Errorf("pin while the database is down: want 503 AUDIT_UNAVAILABLE, got %s", r)
		}
		if r := call("GET", p.URL+"/readyz", "", nil); r.Status != http.StatusServiceUnavailable {
			t.Errorf("/readyz while the database is down: want 503, got %s", r)
		}
		if r := call("GET", p.URL+"/healthz", "", nil); r.Status != http.StatusOK {
			t.Errorf("/healthz (liveness) while the database is down: want 200, got %s", r)
		}
	}
	// expectResume polls until routes succeed again, by themselves.
	expectResume := func(t *testing.T, prefix string) {
		start := time.Now()
		for i := 0; ; i++ {
			r := route(fmt.Sprintf("%s-%d", prefix, i))
			if r.Status == http.StatusOK {
				t.Logf("routes resumed %s after the database came back (attempt %d)", time.Since(start).Round(time.Millisecond), i+1)
				break
			}
			if r.Status != http.StatusServiceUnavailable || r.Code != string(ladder.CodeAuditUnavailable) {
				t.Errorf("route while the database comes back: %s", r)
			}
			if time.Since(start) > 15*time.Second {
				t.Fatalf("routes did not resume within 15s of the database coming back: %s", r)
			}
			time.Sleep(100 * time.Millisecond)
		}
		for start := time.Now(); ; {
			r := call("GET", p.URL+"/readyz", "", nil)
			if r.Status == http.StatusOK {
				break
			}
			if time.Since(start) > 15*time.Second {
				t.Fatalf("/readyz not 200 15s after the database came back: %s", r)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	t.Run("connections cut", func(t *testing.T) {
		pgExec(t, dsn, "ALTER DATABASE "+dbName+" ALLOW_CONNECTIONS false", terminate)
		expectDown(t, "DOWN")
		pgExec(t, dsn, "ALTER DATABASE "+dbName+" ALLOW_CONNECTIONS true")
		expectResume(t, "BACK")
	})

	t.Run("database read-only", func(t *testing.T) {
		// As after a failover to a standby that is not yet promoted: reads
		// answer, writes cannot commit.
		pgExec(t, dsn, "ALTER DATABASE "+dbName+" SET default_transaction_read_only = on", terminate)
		expectDown(t, "RO")
		pgExec(t, dsn, "ALTER DATABASE "+dbName+" RESET default_transaction_read_only", terminate)
		expectResume(t, "RW")
	})

	t.Run("nothing refused was recorded", func(t *testing.T) {
		recs := auditExport(t, db, true, env...)
		for _, r := range recs {
			var d struct {
				Item string `json:"item"`
			}
			if r.Kind == ladder.AuditRoute && json.Unmarshal(r.Data, &d) == nil && refused[d.Item] {
				t.Errorf("route of %s was refused but is in the audit log (seq %d)", d.Item, r.Seq)
			}
			if r.Kind == ladder.AuditReview || r.Kind == ladder.AuditPin {
				t.Errorf("a refused %s is in the audit log (seq %d)", r.Kind, r.Seq)
			}
		}
		// A refused item routes afresh now, as a new route.
		r := route("DOWN-0")
		var rt routeReply
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &rt) != nil || rt.RouteID == "" {
			t.Fatalf("route DOWN-0 after recovery: %s", r)
		}
		m := call("GET", p.URL+"/metrics", "", nil)
		if !strings.Contains(string(m.Body), `ladder_http_requests_total{method="POST",route="POST /v1/route",status="503"}`) {
			t.Errorf("/metrics does not count the refused routes (status 503)")
		}
	})
}

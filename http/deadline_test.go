package http_test

// Issue 15, "Approvals and calls": expired is final, decided by the store's
// clock (the database's, for replicas), and the pending-approval cap holds
// under concurrency, on SQLite and on two or three PostgreSQL replicas.

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
	"github.com/ladderhq/ladder/postgres"
)

// answer is a decoded HTTP answer, from any goroutine.
type answer struct {
	status int
	body   map[string]any
	raw    []byte
	err    error
}

func (a answer) code() string {
	e, _ := a.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// send is Env.Do without t.Fatal, for goroutines.
func send(e *testenv.Env, method, path, key string, body any) answer {
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return answer{err: err}
		}
		rd = bytes.NewReader(b)
	}
	var req *http.Request
	var err error
	if rd != nil {
		req, err = http.NewRequest(method, e.Server.URL+path, rd)
	} else {
		req, err = http.NewRequest(method, e.Server.URL+path, nil)
	}
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := *e.Server.Client()
	c.Timeout = 30 * time.Second // a hang fails the test, not the run
	resp, err := c.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return answer{err: err}
	}
	a := answer{status: resp.StatusCode, raw: buf.Bytes()}
	_ = json.Unmarshal(a.raw, &a.body)
	return a
}

// requestApproval calls the human-gated capability and returns the
// approval's id and deadline.
func requestApproval(t *testing.T, e *testenv.Env, agent, commission string) (string, time.Time) {
	t.Helper()
	r := send(e, "POST", "/v1/capabilities/acme:human/call", agent, map[string]any{"program": "p1", "payload": map[string]any{"commission_id": commission, "relationship": "r-1"}, "idempotency_key": commission})
	if r.err != nil || r.status != 202 || r.body["status"] != "approval_requested" {
		t.Fatalf("request %s: %d %s %v", commission, r.status, r.raw, r.err)
	}
	exp, err := time.Parse(time.RFC3339Nano, r.body["expires_at"].(string))
	if err != nil {
		t.Fatalf("expires_at %v: %v", r.body["expires_at"], err)
	}
	return r.body["approval_id"].(string), exp
}

// statusOf is what the agent's approval_status says.
func statusOf(e *testenv.Env, agent, id string) string {
	r := send(e, "GET", "/v1/approvals/"+id, agent, nil)
	if r.err != nil || r.status != 200 {
		return fmt.Sprintf("error %d %s %v", r.status, r.raw, r.err)
	}
	s, _ := r.body["status"].(string)
	return s
}

// finalAfterExpired returns an error if seq ever goes from expired to
// anything else: expired is final.
func finalAfterExpired(seq []string) error {
	for i, s := range seq {
		if s == "expired" {
			for _, later := range seq[i+1:] {
				if later != "expired" {
					return fmt.Errorf("status went expired → %s: %v", later, compress(seq))
				}
			}
			return nil
		}
	}
	return nil
}

// compress folds runs of one status: pending ×12 → expired ×3.
func compress(seq []string) string {
	var b strings.Builder
	for i := 0; i < len(seq); {
		j := i
		for j < len(seq) && seq[j] == seq[i] {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(" → ")
		}
		fmt.Fprintf(&b, "%s ×%d", seq[i], j-i)
		i = j
	}
	return b.String()
}

// TestApprovalExpiredIsFinal: on SQLite with the injected clock, a decision
// a microsecond before the deadline runs; one at the deadline is
// APPROVAL_EXPIRED, nothing runs, and the agent's approval_status says
// expired from then on, whatever anyone does.
func TestApprovalExpiredIsFinal(t *testing.T) {
	slow := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(slow.Close)
	const ttl = time.Hour
	e := testenv.StartWith(t, capConfig(slow.URL, slow.URL), testenv.Options{ApprovalTTL: ttl})
	agent, human := e.Keys["acme/agent"], e.Keys["acme/human"]

	inTime, _ := requestApproval(t, e, agent, "C-in-time")
	e.Clock.Advance(ttl - time.Microsecond)
	if r := e.Do("POST", "/v1/approvals/"+inTime+"/approve", human, nil); r.Status != 200 || r.Body["status"] != "approved" {
		t.Fatalf("approve a microsecond before the deadline: %d %s", r.Status, r.Raw)
	}

	late, exp := requestApproval(t, e, agent, "C-late")
	if !exp.Equal(e.Clock.Now().Add(ttl)) {
		t.Fatalf("expires_at %v, want the clock's %v plus %v", exp, e.Clock.Now(), ttl)
	}
	if s := statusOf(e, agent, late); s != "pending" {
		t.Fatalf("a new approval is %s", s)
	}
	before := e.Upstream.Calls()
	e.Clock.Advance(ttl)
	r := e.Do("POST", "/v1/approvals/"+late+"/approve", human, nil)
	if r.Status != 410 || r.ErrorCode() != "APPROVAL_EXPIRED" {
		t.Fatalf("approve at the deadline: %d %s", r.Status, r.Raw)
	}
	for range 3 {
		if s := statusOf(e, agent, late); s != "expired" {
			t.Fatalf("after the deadline the agent sees %s", s)
		}
		for _, d := range []struct{ path, body string }{{"/approve", ""}, {"/reject", "too late"}} {
			var body any
			if d.body != "" {
				body = map[string]any{"reason": d.body}
			}
			if r := e.Do("POST", "/v1/approvals/"+late+d.path, human, body); r.Status != 410 || r.ErrorCode() != "APPROVAL_EXPIRED" {
				t.Fatalf("%s after the deadline: %d %s", d.path, r.Status, r.Raw)
			}
		}
		e.Clock.Advance(time.Hour)
	}
	if n := e.Upstream.Calls() - before; n != 0 {
		t.Fatalf("%d upstream calls for an expired approval", n)
	}
	a, err := e.Store.GetApproval(t.Context(), "acme", late)
	if err != nil || a.Status != ladder.ApprovalExpired || a.DecidedBy != "" || a.CallID != "" {
		t.Fatalf("stored approval: %+v %v", a, err)
	}
	// The inbox agrees: expired is listed as expired, not as pending.
	list := e.Do("GET", "/v1/approvals?status=expired", human, nil)
	if list.Status != 200 || !strings.Contains(string(list.Raw), late) {
		t.Fatalf("expired list: %d %s", list.Status, list.Raw)
	}
	if pend := e.Do("GET", "/v1/approvals?status=pending", human, nil); strings.Contains(string(pend.Raw), late) {
		t.Fatalf("pending list holds the expired approval: %s", pend.Raw)
	}
}

// hookStore runs hook just before a decision's compare-and-set from
// pending: the moment between a person's click being checked and being
// committed.
type hookStore struct {
	ladder.Store
	hook atomic.Pointer[func()]
}

func (h *hookStore) UpdateApproval(ctx context.Context, a ladder.Approval, from ladder.ApprovalStatus, audit []ladder.AuditEntry) (ladder.Approval, error) {
	if f := h.hook.Swap(nil); f != nil && from == ladder.ApprovalPending && a.Status != ladder.ApprovalExpired {
		(*f)()
	}
	return h.Store.UpdateApproval(ctx, a, from, audit)
}

// TestApprovalDeadlineRace: a person approves as the deadline passes while
// the agent polls. First the exact interleaving the issue saw (the click
// checked before the deadline, the agent polling after it, the decision
// committing last), then many trials with the clock moving at a random
// moment. The agent's status never goes from expired to anything else, and
// what the approver was told is what the agent ends up seeing.
func TestApprovalDeadlineRace(t *testing.T) {
	slow := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(slow.Close)
	const ttl = time.Hour
	var hs *hookStore
	e := testenv.StartWith(t, capConfig(slow.URL, slow.URL), testenv.Options{ApprovalTTL: ttl,
		WrapStore: func(s ladder.Store) ladder.Store { hs = &hookStore{Store: s}; return hs }})
	agent, human := e.Keys["acme/agent"], e.Keys["acme/human"]

	id, _ := requestApproval(t, e, agent, "C-hook")
	e.Clock.Advance(ttl - time.Millisecond)
	seq := []string{statusOf(e, agent, id)}
	hook := func() {
		e.Clock.Advance(time.Millisecond)
		seq = append(seq, statusOf(e, agent, id))
	}
	hs.hook.Store(&hook)
	r := send(e, "POST", "/v1/approvals/"+id+"/approve", human, nil)
	seq = append(seq, statusOf(e, agent, id), statusOf(e, agent, id))
	if err := finalAfterExpired(seq); err != nil {
		t.Fatalf("approve answered %d %s; %v", r.status, r.raw, err)
	}
	if r.status != 410 || r.code() != "APPROVAL_EXPIRED" || seq[len(seq)-1] != "expired" {
		t.Fatalf("a decision committed after the deadline: %d %s; the agent saw %s", r.status, r.raw, compress(seq))
	}

	const trials = 40
	var won, lost int
	for trial := range trials {
		id, _ := requestApproval(t, e, agent, fmt.Sprint("C-race-", trial))
		e.Clock.Advance(ttl - time.Millisecond)
		var (
			mu   sync.Mutex
			seq  []string
			stop atomic.Bool
			wg   sync.WaitGroup
		)
		wg.Go(func() {
			for !stop.Load() {
				s := statusOf(e, agent, id)
				mu.Lock()
				seq = append(seq, s)
				mu.Unlock()
			}
		})
		wg.Go(func() {
			time.Sleep(time.Duration(rand.IntN(4000)) * time.Microsecond)
			e.Clock.Advance(time.Millisecond)
		})
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		r := send(e, "POST", "/v1/approvals/"+id+"/approve", human, nil)
		time.Sleep(2 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
		seq = append(seq, statusOf(e, agent, id))
		if err := finalAfterExpired(seq); err != nil {
			t.Errorf("trial %d: approve answered %d %s; %v", trial, r.status, r.code(), err)
			continue
		}
		final := seq[len(seq)-1]
		switch {
		case r.status == 200 && final == "approved":
			won++
		case r.status == 410 && r.code() == "APPROVAL_EXPIRED" && final == "expired":
			lost++
		default:
			t.Errorf("trial %d: approve answered %d %s, the agent ends with %s (%s)", trial, r.status, r.code(), final, compress(seq))
		}
	}
	t.Logf("%d trials: %d approvals won the deadline, %d lost to it", trials, won, lost)
}

// TestPendingCapConcurrent: 200 concurrent calls of one key through the
// REST API leave exactly the cap (100) pending; the rest are RATE_LIMITED.
func TestPendingCapConcurrent(t *testing.T) {
	slow := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(slow.Close)
	e := testenv.StartWith(t, capConfig(slow.URL, slow.URL), testenv.Options{MaxInFlight: -1, MaxInFlightPerKey: -1, MaxInFlightPerAddress: -1})
	flood(t, []*testenv.Env{e}, e.Keys["acme/agent"], 200, 100)
}

// flood sends n concurrent capped calls of one agent key, spread over the
// replicas, and checks that exactly max approvals are pending.
func flood(t *testing.T, replicas []*testenv.Env, agent string, n, max int) {
	t.Helper()
	var created, refused atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		e := replicas[i%len(replicas)]
		wg.Go(func() {
			<-start
			r := send(e, "POST", "/v1/capabilities/acme:human/call", agent, map[string]any{"program": "p1", "payload": map[string]any{"commission_id": fmt.Sprint("F-", i)}, "idempotency_key": fmt.Sprint("F-", i)})
			switch {
			case r.status == 202 && r.body["status"] == "approval_requested":
				created.Add(1)
			case r.status == 429 && r.code() == "RATE_LIMITED" && strings.Contains(string(r.raw), fmt.Sprintf(`"max_pending":%d`, max)):
				refused.Add(1)
			default:
				t.Errorf("call %d: %d %s %v", i, r.status, r.raw, r.err)
			}
		})
	}
	close(start)
	wg.Wait()
	list, err := replicas[0].Store.ListApprovals(t.Context(), ladder.ApprovalQuery{Workspace: "acme", Status: ladder.ApprovalPending, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if created.Load() != int32(max) || refused.Load() != int32(n-max) || len(list) != max {
		t.Fatalf("%d concurrent calls: %d approvals requested, %d refused, %d pending stored; want %d, %d, %d",
			n, created.Load(), refused.Load(), len(list), max, n-max, max)
	}
}

// pgReplicas starts n servers on one fresh PostgreSQL schema, replica i on
// clocks[i], as `ladder serve` replicas behind a load balancer would run.
// It skips without LADDER_TEST_POSTGRES.
func pgReplicas(t *testing.T, clocks []*testenv.Clock, opts testenv.Options) []*testenv.Env {
	t.Helper()
	dsn := os.Getenv("LADDER_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("LADDER_TEST_POSTGRES is not set; skipping PostgreSQL replicas")
	}
	var b [6]byte
	_, _ = crand.Read(b[:])
	schema := "ladder_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	slow := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(slow.Close)
	var out []*testenv.Env
	for _, c := range clocks {
		o := opts
		o.Clock = c
		o.OpenStore = func(now func() time.Time) (ladder.Store, error) {
			return postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema, Now: now})
		}
		out = append(out, testenv.StartWith(t, capConfig(slow.URL, slow.URL), o))
	}
	return out
}

// TestApprovalDeadlineReplicasPostgres: three replicas on one database, one
// with the right clock, one ten minutes behind, one ten minutes ahead. The
// database's clock decides: the deadline is counted from it, the replica
// behind cannot approve after it, the replica ahead can approve before it,
// and every replica tells the agent the same. Then trials of approving at
// the deadline on the skewed replicas while the agent polls all three.
func TestApprovalDeadlineReplicasPostgres(t *testing.T) {
	const ttl = 2 * time.Second
	reps := pgReplicas(t, []*testenv.Clock{testenv.WallClock(0), testenv.WallClock(-10 * time.Minute), testenv.WallClock(10 * time.Minute)},
		testenv.Options{ApprovalTTL: ttl, MaxInFlight: -1, MaxInFlightPerKey: -1, MaxInFlightPerAddress: -1})
	right, behind, ahead := reps[0], reps[1], reps[2]
	agent, human := right.Keys["acme/agent"], right.Keys["acme/human"]
	everyone := func(id string) []string {
		var out []string
		for _, e := range reps {
			out = append(out, statusOf(e, agent, id))
		}
		return out
	}

	// Requested on the replica behind: the deadline is the database's.
	late, exp := requestApproval(t, behind, agent, "PG-late")
	if d := time.Until(exp); d < ttl/2 || d > ttl+time.Second {
		t.Fatalf("a request on the replica behind expires in %v, want about %v", d, ttl)
	}
	if got := everyone(late); strings.Join(got, ",") != "pending,pending,pending" {
		t.Fatalf("before the deadline the replicas say %v", got)
	}
	time.Sleep(time.Until(exp) + 200*time.Millisecond)
	if r := send(behind, "POST", "/v1/approvals/"+late+"/approve", human, nil); r.status != 410 || r.code() != "APPROVAL_EXPIRED" {
		t.Fatalf("approve on the replica behind, after the deadline: %d %s", r.status, r.raw)
	}
	if got := everyone(late); strings.Join(got, ",") != "expired,expired,expired" {
		t.Fatalf("after the deadline the replicas say %v", got)
	}

	// Requested on the right replica, approved at once on the one ahead.
	early, _ := requestApproval(t, right, agent, "PG-early")
	if r := send(ahead, "POST", "/v1/approvals/"+early+"/approve", human, nil); r.status != 200 || r.body["status"] != "approved" {
		t.Fatalf("approve on the replica ahead, before the deadline: %d %s", r.status, r.raw)
	}
	if got := everyone(early); strings.Join(got, ",") != "approved,approved,approved" {
		t.Fatalf("after the approval the replicas say %v", got)
	}

	// Trials at the deadline, all at once.
	const trials = 16
	var won, lost atomic.Int32
	var wg sync.WaitGroup
	for trial := range trials {
		id, exp := requestApproval(t, reps[trial%3], agent, fmt.Sprint("PG-race-", trial))
		if d := time.Until(exp); d > ttl+time.Second {
			t.Fatalf("trial %d: the deadline is %v away, not the database's %v", trial, d, ttl)
		}
		approver := reps[1+trial%2]
		wg.Go(func() {
			var (
				seq  []string
				stop atomic.Bool
				pw   sync.WaitGroup
				mu   sync.Mutex
			)
			pw.Go(func() {
				for i := 0; !stop.Load(); i++ {
					s := statusOf(reps[i%3], agent, id)
					mu.Lock()
					seq = append(seq, s)
					mu.Unlock()
				}
			})
			jitter := time.Duration(rand.IntN(40)-20) * time.Millisecond
			time.Sleep(time.Until(exp) + jitter)
			r := send(approver, "POST", "/v1/approvals/"+id+"/approve", human, nil)
			time.Sleep(20 * time.Millisecond)
			stop.Store(true)
			pw.Wait()
			seq = append(seq, everyone(id)...)
			if err := finalAfterExpired(seq); err != nil {
				t.Errorf("trial %d: approve answered %d %s; %v", trial, r.status, r.code(), err)
				return
			}
			final := seq[len(seq)-3:]
			switch f := strings.Join(final, ","); {
			case r.status == 200 && f == "approved,approved,approved":
				won.Add(1)
			case r.status == 410 && r.code() == "APPROVAL_EXPIRED" && f == "expired,expired,expired":
				lost.Add(1)
			default:
				t.Errorf("trial %d: approve answered %d %s, the replicas end with %s (%s)", trial, r.status, r.code(), f, compress(seq))
			}
		})
	}
	wg.Wait()
	t.Logf("%d trials at the deadline: %d approvals won, %d lost", trials, won.Load(), lost.Load())
}

// TestPendingCapReplicasPostgres: 200 concurrent calls of one key, spread
// over two replicas on one database, leave exactly the cap pending.
func TestPendingCapReplicasPostgres(t *testing.T) {
	reps := pgReplicas(t, []*testenv.Clock{testenv.WallClock(0), testenv.WallClock(0)},
		testenv.Options{MaxInFlight: -1, MaxInFlightPerKey: -1, MaxInFlightPerAddress: -1})
	flood(t, reps, reps[0].Keys["acme/agent"], 200, 100)
}

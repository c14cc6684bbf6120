package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/webhook"
)

// hookConfig is a workspace whose one capability is a human gate (every
// call is an approval.requested event) and whose events go to url.
func hookConfig(t *testing.T, url string) string {
	t.Helper()
	cfg := `workspaces:
  - id: ops
    queues:
      - id: q
        steps:
          - {id: s1, name: Step one}
    capabilities:
      - id: pay:send
        title: Send a payment
        description: Sends a payment to a partner. A person approves every call first; the call returns an approval id to poll.
        human_gate: true
        payload_schema: {type: object, properties: {ref: {type: string, description: The payment reference.}}}
        executor: {kind: record}
    webhooks:
      - name: hook
        url: ` + url + `
        secret_env: HOOK_SECRET
        backoff: 50ms
        timeout: 2s
`
	path := filepath.Join(t.TempDir(), "ladder.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newSecret returns a whsec_ secret and its key.
func newSecret() (string, []byte) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return webhook.SecretPrefix + base64.StdEncoding.EncodeToString(key), key
}

// receiver is a webhook endpoint: it answers each try with the status
// the test sets (500 for the first fail tries, then 204), and keeps what
// arrived with a valid signature.
type receiver struct {
	t    *testing.T
	key  []byte
	fail int

	mu     sync.Mutex
	tries  map[string]int          // tries per webhook-id
	events map[string]ladder.Event // verified and answered 2xx, by id
	// delivered counts the 2xx answers per id.
	delivered map[string]int
	got       chan string // every try's webhook-id
}

func newReceiver(t *testing.T, key []byte, fail int) (*receiver, *httptest.Server) {
	r := &receiver{t: t, key: key, fail: fail, tries: map[string]int{}, events: map[string]ladder.Event{}, delivered: map[string]int{}, got: make(chan string, 1000)}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id := req.Header.Get("webhook-id")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tries[id]++
	select {
	case r.got <- id:
	default:
	}
	if r.tries[id] <= r.fail {
		http.Error(w, "not yet", http.StatusInternalServerError)
		return
	}
	if err := webhook.Verify(r.key, id, req.Header.Get("webhook-timestamp"), req.Header.Get("webhook-signature"), body, time.Now()); err != nil {
		r.t.Errorf("try %d of %s: %v", r.tries[id], id, err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var ev ladder.Event
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID != id {
		r.t.Errorf("body %s: %v (webhook-id %s)", body, err, id)
	}
	r.events[id] = ev
	r.delivered[id]++
	w.WriteHeader(http.StatusNoContent)
}

// waitEvents waits until n events were delivered and returns them by id.
func (r *receiver) waitEvents(n int, within time.Duration) map[string]ladder.Event {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for {
		r.mu.Lock()
		got := len(r.events)
		out := make(map[string]ladder.Event, got)
		for k, v := range r.events {
			out[k] = v
		}
		r.mu.Unlock()
		if got >= n {
			return out
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%d events delivered within %s, want %d", got, within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// agentKey creates a key of workspace ops.
func agentKey(t *testing.T, url, admin, kind string) string {
	t.Helper()
	var k struct {
		Token string `json:"token"`
	}
	mustCall(t, 201, "POST", url+"/v1/keys", admin, map[string]any{"workspace": "ops", "kind": kind, "name": "hook-test-" + kind}, &k)
	return k.Token
}

// requestApproval calls the human-gate capability and returns the
// approval's id.
func requestApproval(t *testing.T, url, agent, ref string) string {
	t.Helper()
	var res struct {
		ApprovalID string `json:"approval_id"`
	}
	mustCall(t, 202, "POST", url+"/v1/capabilities/pay:send/call", agent, map[string]any{"ref": ref, "idempotency_key": ref}, &res)
	return res.ApprovalID
}

// TestWebhookDelivery: an approval's events reach a real receiver that
// fails the first two tries of each, with a valid Standard Webhooks
// signature, and the delivery state shows the tries.
func TestWebhookDelivery(t *testing.T) {
	secret, key := newSecret()
	rcv, hook := newReceiver(t, key, 2)
	_, admin, _ := ladder.NewKeyToken()
	srv := startServe(t, "a", hookConfig(t, hook.URL), filepath.Join(t.TempDir(), "ladder.db"),
		"LADDER_ADMIN_KEY="+admin, "HOOK_SECRET="+secret, "LADDER_AUDIT_SECRET=hook-test")
	agent, human := agentKey(t, srv.URL, admin, "agent"), agentKey(t, srv.URL, admin, "human")

	apID := requestApproval(t, srv.URL, agent, "pay-1")
	mustCall(t, 200, "POST", srv.URL+"/v1/approvals/"+apID+"/reject", human, map[string]any{"reason": "wrong partner"}, nil)
	events := rcv.waitEvents(2, 30*time.Second)

	var types []string
	for _, ev := range events {
		types = append(types, ev.Type)
		if ev.Workspace != "ops" || ev.Data.ApprovalID != apID || ev.Data.Link != srv.URL+"/console/approvals/"+apID || ev.Data.Text == "" {
			t.Errorf("event %+v", ev)
		}
		if ev.Type == ladder.EventApprovalDecided && (ev.Data.Decision != "rejected" || ev.Data.DecidedBy == "") {
			t.Errorf("decided event %+v", ev.Data)
		}
	}
	if !cmp.Equal(sortedStrings(types), []string{ladder.EventApprovalDecided, ladder.EventApprovalRequested}) {
		t.Errorf("event types %v", types)
	}
	// The state shows three tries of each, delivered.
	var page ladder.DeliveryPage
	for deadline := time.Now().Add(10 * time.Second); ; {
		mustCall(t, 200, "GET", srv.URL+"/v1/webhooks/deliveries", human, nil, &page)
		// The receiver answered before the server recorded the answer.
		if len(page.Deliveries) == 2 && page.Deliveries[0].Status != ladder.DeliveryPending && page.Deliveries[1].Status != ladder.DeliveryPending || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(page.Deliveries) != 2 {
		t.Fatalf("deliveries %+v", page)
	}
	for _, d := range page.Deliveries {
		if d.Status != ladder.DeliveryDelivered || d.Attempts != 3 || d.Endpoint != "ops/hook" || d.LastStatus != 204 {
			t.Errorf("delivery %+v, want delivered on the third try", d)
		}
	}
	// An agent key sees nothing of it.
	if r := call("GET", srv.URL+"/v1/webhooks/deliveries", agent, nil); r.Status != 403 {
		t.Errorf("agent key: %s", r)
	}
	// Redelivery sends the same event id again.
	d := page.Deliveries[0]
	mustCall(t, 200, "POST", srv.URL+"/v1/webhooks/deliveries/"+d.ID+"/redeliver", human, nil, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		rcv.mu.Lock()
		n := rcv.tries[d.EventID]
		rcv.mu.Unlock()
		if n == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redelivery: %d tries of %s, want 4", n, d.EventID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The metrics count the tries.
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`ladder_webhook_attempts_total{endpoint="ops/hook",outcome="failed"} 4`, `ladder_webhook_deliveries{status="dead"} 0`, "ladder_webhook_oldest_undelivered_seconds", "ladder_approvals_oldest_pending_seconds"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestWebhookCrash: the server is killed with SIGKILL after the event
// committed and before it was delivered (its first try failed); after a
// restart on the same database, the event arrives with the same id.
func TestWebhookCrash(t *testing.T) {
	secret, key := newSecret()
	rcv, hook := newReceiver(t, key, 1)
	_, admin, _ := ladder.NewKeyToken()
	dir := t.TempDir()
	cfg := hookConfig(t, hook.URL)
	logFile, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	addr := freeAddr(t)
	env := append(os.Environ(), "LADDER_ADMIN_KEY="+admin, "HOOK_SECRET="+secret, "LADDER_AUDIT_SECRET=hook-test")
	srv := &crashServer{t: t, bin: ladderBinary(t), args: []string{"serve", "--unsigned-audit", "--config", cfg, "--db", filepath.Join(dir, "ladder.db"), "--addr", addr}, env: env, url: "http://" + addr, log: logFile}
	srv.start()
	defer func() {
		if srv.cmd.ProcessState == nil {
			srv.kill()
		}
	}()
	agent := agentKey(t, srv.url, admin, "agent")
	apID := requestApproval(t, srv.url, agent, "pay-crash")
	var first string
	select {
	case first = <-rcv.got:
	case <-time.After(30 * time.Second):
		t.Fatal("no try within 30s")
	}
	srv.kill()
	srv.start()
	events := rcv.waitEvents(1, 30*time.Second)
	ev, ok := events[first]
	if !ok || ev.Data.ApprovalID != apID || ev.Type != ladder.EventApprovalRequested {
		t.Fatalf("delivered after the restart: %+v, want %s (approval.requested of %s)", events, first, apID)
	}
	srv.stop()
}

// TestWebhookReplicas: two replicas on one PostgreSQL database deliver
// each event once.
func TestWebhookReplicas(t *testing.T) {
	dsn := postgresDSN(t)
	schema := freshSchema(t, dsn)
	secret, key := newSecret()
	rcv, hook := newReceiver(t, key, 0)
	_, admin, _ := ladder.NewKeyToken()
	cfg := hookConfig(t, hook.URL)
	env := []string{"LADDER_ADMIN_KEY=" + admin, "HOOK_SECRET=" + secret, "LADDER_AUDIT_SECRET=hook-test", "LADDER_PG_SCHEMA=" + schema}
	a := startServe(t, "a", cfg, dsn, env...)
	b := startServe(t, "b", cfg, dsn, env...)
	agent := agentKey(t, a.URL, admin, "agent")
	const n = 30
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := a.URL
			if i%2 == 1 {
				url = b.URL
			}
			requestApproval(t, url, agent, fmt.Sprintf("pay-%d", i))
		}()
	}
	wg.Wait()
	rcv.waitEvents(n, 60*time.Second)
	time.Sleep(2 * time.Second) // a second delivery would come now
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for id, n := range rcv.delivered {
		if n != 1 {
			t.Errorf("event %s delivered %d times", id, n)
		}
	}
	if len(rcv.events) != n {
		t.Errorf("%d events, want %d", len(rcv.events), n)
	}
}

// TestApprovalWaitAcrossReplicas: an agent waits on replica a while a
// person rejects on replica b; a answers with the decision before the
// wait ends (it hears of it through PostgreSQL's LISTEN/NOTIFY).
func TestApprovalWaitAcrossReplicas(t *testing.T) {
	dsn := postgresDSN(t)
	schema := freshSchema(t, dsn)
	cfg := hookConfig(t, "http://127.0.0.1:9/")
	secret, _ := newSecret()
	_, admin, _ := ladder.NewKeyToken()
	env := []string{"LADDER_ADMIN_KEY=" + admin, "HOOK_SECRET=" + secret, "LADDER_AUDIT_SECRET=hook-test", "LADDER_PG_SCHEMA=" + schema}
	a := startServe(t, "a", cfg, dsn, env...)
	b := startServe(t, "b", cfg, dsn, env...)
	agent, human := agentKey(t, a.URL, admin, "agent"), agentKey(t, a.URL, admin, "human")
	id := requestApproval(t, a.URL, agent, "pay-wait")
	done := make(chan reply, 1)
	go func() { done <- call("GET", a.URL+"/v1/approvals/"+id+"?wait=30", agent, nil) }()
	time.Sleep(500 * time.Millisecond)
	mustCall(t, 200, "POST", b.URL+"/v1/approvals/"+id+"/reject", human, map[string]any{"reason": "decided on b"}, nil)
	select {
	case r := <-done:
		var v ladder.ApprovalView
		if r.Status != 200 || json.Unmarshal(r.Body, &v) != nil || v.Status != ladder.ApprovalRejected || v.DecisionReason != "decided on b" {
			t.Fatalf("waiting agent on a got %s", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the agent waiting on replica a did not hear of the decision on b before its wait ended")
	}

	// A capability call that waits on a gets the executed result when a
	// person approves it on b.
	called := make(chan reply, 1)
	go func() {
		called <- call("POST", a.URL+"/v1/capabilities/pay:send/call?wait=30", agent, map[string]any{"ref": "pay-call-wait", "idempotency_key": "pay-call-wait"})
	}()
	var pending struct {
		Approvals []ladder.ApprovalView `json:"approvals"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(pending.Approvals) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the waiting call made no approval")
		}
		time.Sleep(50 * time.Millisecond)
		mustCall(t, 200, "GET", b.URL+"/v1/approvals?status=pending", human, nil, &pending)
	}
	mustCall(t, 200, "POST", b.URL+"/v1/approvals/"+pending.Approvals[0].ID+"/approve", human, nil, nil)
	approved := time.Now()
	select {
	case r := <-called:
		t.Logf("the call waiting on a answered %s after the approval on b", time.Since(approved))
		var res ladder.CallResult
		if r.Status != 200 || json.Unmarshal(r.Body, &res) != nil || res.Status != ladder.CallResultExecuted || res.ApprovalID != pending.Approvals[0].ID || res.CallID == "" {
			t.Fatalf("the call waiting on a got %s", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call waiting on replica a did not hear of the approval on b before its wait ended")
	}
}

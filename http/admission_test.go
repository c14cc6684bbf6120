package http_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	lhttp "github.com/ladderhq/ladder/http"
	"github.com/ladderhq/ladder/internal/testenv"
)

// otherLoopback is the address the slow clients come from, so the
// per-address cap they fill is not the test client's (127.0.0.1).
const otherLoopback = "127.0.0.2"

// slowClients opens connections that send a request header promising a
// large body and then trickle the body a byte at a time; it records the
// status of each answer. Every connection has a deadline and all close
// when the test ends.
type slowClients struct {
	t    *testing.T
	addr string
	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	conns    []net.Conn
	statuses map[int]int
	answered int
}

func newSlowClients(t *testing.T, e *testenv.Env) *slowClients {
	sc := &slowClients{t: t, addr: e.Server.Listener.Addr().String(), stop: make(chan struct{}), statuses: map[int]int{}}
	t.Cleanup(sc.close)
	return sc
}

// needOtherLoopback skips the test where 127.0.0.2 cannot be bound (macOS
// configures only 127.0.0.1 by default).
func needOtherLoopback(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", otherLoopback+":0")
	if err != nil {
		t.Skipf("cannot use %s as a second client address: %v", otherLoopback, err)
	}
	ln.Close()
}

// open starts one slow request from local ("" for any address).
func (sc *slowClients) open(local, method, path, key, ctype string) {
	sc.t.Helper()
	d := net.Dialer{Timeout: 2 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	c, err := d.Dial("tcp", sc.addr)
	if err != nil {
		sc.t.Fatalf("dial from %q: %v", local, err)
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100000\r\n", method, path, sc.addr, ctype)
	if key != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", key)
	}
	b.WriteString("\r\n{")
	if _, err := io.WriteString(c, b.String()); err != nil {
		c.Close()
		sc.t.Fatalf("write header: %v", err)
	}
	sc.mu.Lock()
	sc.conns = append(sc.conns, c)
	sc.mu.Unlock()
	sc.wg.Add(2)
	go func() { // trickle
		defer sc.wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sc.stop:
				return
			case <-tick.C:
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	go func() { // read the answer, if one comes
		defer sc.wg.Done()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return
		}
		resp.Body.Close()
		sc.mu.Lock()
		sc.statuses[resp.StatusCode]++
		sc.answered++
		sc.mu.Unlock()
	}()
}

// waitAnswered waits up to d for at least n answers and returns the count.
func (sc *slowClients) waitAnswered(n int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		sc.mu.Lock()
		got := sc.answered
		sc.mu.Unlock()
		if got >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (sc *slowClients) status(code int) int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.statuses[code]
}

// keep opens more slow requests with open until n are unanswered.
func (sc *slowClients) keep(n int, open func()) {
	for {
		sc.mu.Lock()
		pending := len(sc.conns) - sc.answered
		sc.mu.Unlock()
		if pending >= n {
			return
		}
		open()
	}
}

func (sc *slowClients) answers() map[int]int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return maps.Clone(sc.statuses)
}

func (sc *slowClients) close() {
	sc.mu.Lock()
	select {
	case <-sc.stop:
		sc.mu.Unlock()
		return
	default:
	}
	close(sc.stop)
	for _, c := range sc.conns {
		c.Close()
	}
	sc.mu.Unlock()
	sc.wg.Wait()
}

// eventually retries f every 20 ms until it returns "" or d passes, and
// fails with its last message.
func eventually(t *testing.T, d time.Duration, f func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAdmissionSlowBodies is issue 14's flood: 300 connections that send a
// header and then trickle the body — half with workspace A's agent key,
// half with no key from another address — on REST, /mcp and the console
// form. Meanwhile workspace B's agent routes an item and the console
// sign-in page answers, each within a second: a trickled body holds only
// its key's or its address's slots, never the shared cap. (Before
// admission, these connections held all 256 global slots and both answers
// were 503 OVERLOADED.)
func TestAdmissionSlowBodies(t *testing.T) {
	needOtherLoopback(t)
	e := testenv.Start(t, "")
	agentA, agentB := e.Keys["vantrow-bills/agent"], e.Keys["checkcall-loads/agent"]
	sc := newSlowClients(t, e)
	for i := range 150 {
		if i%2 == 0 {
			sc.open(otherLoopback, "POST", "/v1/route", agentA, "application/json")
			sc.open(otherLoopback, "POST", "/mcp", "", "application/json")
		} else {
			sc.open(otherLoopback, "POST", "/mcp", agentA, "application/json")
			sc.open(otherLoopback, "POST", "/console/signin", "", "application/x-www-form-urlencoded")
		}
	}
	// With the default caps, 32 of A's and 32 of the keyless requests are
	// admitted to read their bodies; the other 236 are refused at once.
	wantRefused := 300 - lhttpDefaultPerKey - lhttpDefaultPerAddress
	got := sc.waitAnswered(wantRefused, 10*time.Second)

	start := time.Now()
	r := e.Do("POST", "/v1/route", agentB, map[string]any{"step": "capture_eta", "item": "LOAD-1"})
	if d := time.Since(start); r.Status != 200 || d > time.Second {
		t.Fatalf("workspace B's agent during the flood: %d in %s %s", r.Status, d, r.Raw)
	}
	start = time.Now()
	r = e.Do("GET", "/console/signin", "", nil)
	if d := time.Since(start); r.Status != 200 || d > time.Second {
		t.Fatalf("console sign-in during the flood: %d in %s %.300s", r.Status, d, r.Raw)
	}
	if got < wantRefused || sc.status(http.StatusTooManyRequests) != wantRefused {
		t.Fatalf("answered %d of the slow requests (%v), want exactly %d refused with 429", got, sc.answers(), wantRefused)
	}
	rest := metricValue(t, e, `ladder_refusals_total{code="RATE_LIMITED",surface="rest"}`)
	mcp := metricValue(t, e, `ladder_refusals_total{code="RATE_LIMITED",surface="mcp"}`)
	if int(rest+mcp) != wantRefused || mcp == 0 {
		t.Fatalf("RATE_LIMITED refusals counted rest %v + mcp %v, want %d", rest, mcp, wantRefused)
	}

	// When the slow clients go, their slots are free again.
	sc.close()
	eventually(t, 10*time.Second, func() string {
		if r := e.Do("GET", "/v1/steps", agentA, nil); r.Status != 200 {
			return fmt.Sprintf("workspace A after the flood: %d %s", r.Status, r.Raw)
		}
		return ""
	})
}

// The http package's defaults, restated so a change to them is a
// deliberate change to this test too.
const (
	lhttpDefaultPerKey     = 32
	lhttpDefaultPerAddress = 32
)

// TestAdmissionPerKeyCap fills one key's slots with slow bodies: the next
// request of that key is refused at once with 429 RATE_LIMITED on REST and
// as a JSON-RPC error on /mcp, another key of the same workspace is served,
// and the key is served again once its requests end.
func TestAdmissionPerKeyCap(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{MaxInFlightPerKey: 2})
	agent, human := e.Keys["vantrow-bills/agent"], e.Keys["vantrow-bills/human"]
	sc := newSlowClients(t, e)
	sc.open("", "POST", "/v1/route", agent, "application/json")
	sc.open("", "POST", "/mcp", agent, "application/json")
	var r testenv.Response
	eventually(t, 10*time.Second, func() string {
		// A probe that held a slot when a slow request arrived got that
		// request refused: open another in its place.
		sc.keep(2, func() { sc.open("", "POST", "/v1/route", agent, "application/json") })
		if r = e.Do("GET", "/v1/steps", agent, nil); r.Status != 429 {
			return fmt.Sprintf("a third request of the key: %d (the slow requests were answered %v) %.200s", r.Status, sc.answers(), r.Raw)
		}
		return ""
	})
	if r.ErrorCode() != "RATE_LIMITED" || r.Header.Get("Retry-After") != "1" || !strings.Contains(r.ErrorHint(), "nothing was done") ||
		!strings.Contains(string(r.Raw), `"max_in_flight_per_key":2`) {
		t.Fatalf("per-key refusal: %d %v %s", r.Status, r.Header, r.Raw)
	}
	m := e.Do("POST", "/mcp", agent, rpcBody(3, "tools/list", nil))
	if re := rpcErr(m); m.Status != 429 || re == nil || re["message"] != "RATE_LIMITED" || re["code"] != float64(ladder.RPCRefused) || m.Body["id"] != nil {
		t.Fatalf("per-key refusal on /mcp: %d %s", m.Status, m.Raw)
	}
	if r := e.Do("GET", "/v1/approvals", human, nil); r.Status != 200 {
		t.Fatalf("another key of the workspace: %d %s", r.Status, r.Raw)
	}
	sc.close()
	eventually(t, 10*time.Second, func() string {
		if r := e.Do("GET", "/v1/steps", agent, nil); r.Status != 200 {
			return fmt.Sprintf("the key after its requests ended: %d %s", r.Status, r.Raw)
		}
		return ""
	})
}

// TestAdmissionPerAddressCap fills one address's keyless slots with slow
// console form posts: the next keyless request from that address is
// refused, while keyless requests from another address and keyed requests
// from the same address are served.
func TestAdmissionPerAddressCap(t *testing.T) {
	needOtherLoopback(t)
	e := testenv.StartWith(t, "", testenv.Options{MaxInFlightPerAddress: 2})
	sc := newSlowClients(t, e)
	sc.open(otherLoopback, "POST", "/console/signin", "", "application/x-www-form-urlencoded")
	sc.open(otherLoopback, "POST", "/mcp", "", "application/json")
	from2 := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(otherLoopback)}}).DialContext}}
	t.Cleanup(from2.CloseIdleConnections)
	get := func(c *http.Client, path, key string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", e.Server.URL+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	eventually(t, 10*time.Second, func() string {
		sc.keep(2, func() { sc.open(otherLoopback, "POST", "/console/signin", "", "application/x-www-form-urlencoded") })
		if resp, body := get(from2, "/console/signin", ""); resp.StatusCode != 429 || !bytes.Contains(body, []byte(`"RATE_LIMITED"`)) ||
			!bytes.Contains(body, []byte(`"max_in_flight_per_address":2`)) || resp.Header.Get("Retry-After") != "1" {
			return fmt.Sprintf("a third keyless request from %s: %d %s", otherLoopback, resp.StatusCode, body)
		}
		return ""
	})
	if resp, body := get(e.Server.Client(), "/console/signin", ""); resp.StatusCode != 200 {
		t.Fatalf("keyless from 127.0.0.1: %d %.300s", resp.StatusCode, body)
	}
	if resp, body := get(from2, "/v1/steps", e.Keys["vantrow-bills/agent"]); resp.StatusCode != 200 {
		t.Fatalf("a keyed request from %s: %d %s", otherLoopback, resp.StatusCode, body)
	}
}

// TestAdmissionBodyTimeout: a body that does not arrive within the body
// timeout is answered 408 BODY_TIMEOUT (a JSON-RPC error on /mcp) and the
// connection closes, freeing the key's only slot.
func TestAdmissionBodyTimeout(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{BodyTimeout: 250 * time.Millisecond, MaxInFlightPerKey: 1})
	agent := e.Keys["vantrow-bills/agent"]
	addr := e.Server.Listener.Addr().String()
	for _, tt := range []struct{ path, key, ctype string }{
		{"/v1/route", agent, "application/json"},
		{"/mcp", agent, "application/json"},
		{"/console/signin", "", "application/x-www-form-urlencoded"},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nAuthorization: Bearer %s\r\nContent-Length: 500\r\n\r\n{\"step\":", tt.path, addr, tt.ctype, tt.key)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			c.Close()
			t.Fatalf("%s: %v", tt.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		_, after := br.ReadByte() // the server closes the connection
		c.Close()
		var got struct {
			Error struct {
				Code    any    `json:"code"`
				Message string `json:"message"`
				Hint    string `json:"hint"`
				Data    struct {
					Hint string `json:"hint"`
				} `json:"data"`
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &got)
		name, hint := fmt.Sprint(got.Error.Code), got.Error.Hint
		if tt.path == "/mcp" {
			name, hint = got.Error.Message, got.Error.Data.Hint
		}
		if resp.StatusCode != 408 || name != "BODY_TIMEOUT" || !strings.Contains(hint, "nothing was done") || !resp.Close || after != io.EOF {
			t.Fatalf("%s: %d close=%v after=%v %s", tt.path, resp.StatusCode, resp.Close, after, body)
		}
		if d < 200*time.Millisecond || d > 2*time.Second {
			t.Fatalf("%s: answered after %s, want about the 250 ms body timeout", tt.path, d)
		}
	}
	// The key's one slot is free again.
	if r := e.Do("POST", "/v1/route", agent, map[string]any{"step": "post_tms", "item": "BT-1"}); r.Status != 200 {
		t.Fatalf("after the timeouts: %d %s", r.Status, r.Raw)
	}
	if v := metricValue(t, e, `ladder_refusals_total{code="BODY_TIMEOUT",surface="rest"}`); v != 2 {
		t.Fatalf("rest BODY_TIMEOUT refusals = %v, want 2", v)
	}
	if v := metricValue(t, e, `ladder_refusals_total{code="BODY_TIMEOUT",surface="mcp"}`); v != 1 {
		t.Fatalf("mcp BODY_TIMEOUT refusals = %v, want 1", v)
	}
}

// TestAdmissionBodyDeadlineLifted: once its body is in, a request may run
// longer than the body timeout. A read deadline left in place would cancel
// the request's context mid-handler (net/http's background read would
// fail); net/http clears it when the body ends, and this keeps it so.
func TestAdmissionBodyDeadlineLifted(t *testing.T) {
	e := testenv.Start(t, "")
	wait := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
			w.WriteHeader(http.StatusInternalServerError)
		case <-time.After(600 * time.Millisecond):
			w.WriteHeader(http.StatusNoContent)
		}
	})
	srv := httptest.NewServer(lhttp.New(lhttp.Options{Service: e.Svc, BodyTimeout: 150 * time.Millisecond, Mounts: map[string]http.Handler{"/test/wait": wait}}))
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Post(srv.URL+"/test/wait", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("a handler running past the body timeout: %d, want 204", resp.StatusCode)
	}
}

// TestAdmissionRefusesKeylessBeforeBody: on /v1/ a missing or invalid key
// is answered at once, without waiting for the body the request promised,
// and the connection closes instead of draining it.
func TestAdmissionRefusesKeylessBeforeBody(t *testing.T) {
	e := testenv.Start(t, "")
	addr := e.Server.Listener.Addr().String()
	for _, tt := range []struct{ key, code string }{{"", "KEY_MISSING"}, {"ldr_aaaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbb", "KEY_INVALID"}} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		auth := ""
		if tt.key != "" {
			auth = "Authorization: Bearer " + tt.key + "\r\n"
		}
		fmt.Fprintf(c, "POST /v1/route HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%sContent-Length: 900000\r\n\r\n", addr, auth)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			c.Close()
			t.Fatalf("%s: no answer before the body: %v", tt.code, err)
		}
		body, _ := io.ReadAll(resp.Body)
		c.Close()
		if resp.StatusCode != 401 || !bytes.Contains(body, []byte(tt.code)) || !resp.Close || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("%s: %d close=%v %s", tt.code, resp.StatusCode, resp.Close, body)
		}
	}
}

// TestUnsupportedMediaType: a REST or /mcp body whose Content-Type is not
// JSON gets 415 naming the type and the header to send, before anything is
// done; JSON types, with parameters or +json, and an absent Content-Type
// on REST pass; the console's form posts still reach the console.
func TestUnsupportedMediaType(t *testing.T) {
	e := testenv.Start(t, "")
	agent := e.Keys["vantrow-bills/agent"]
	body := `{"step":"post_tms","item":"CT-1"}`
	send := func(path, ctype, key, body string) testenv.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", e.Server.URL+path, strings.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := e.Server.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		r := testenv.Response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
		_ = json.Unmarshal(raw, &r.Body)
		return r
	}
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonp", "not a type"} {
		r := send("/v1/route", ct, agent, body)
		if r.Status != 415 || r.ErrorCode() != "UNSUPPORTED_MEDIA_TYPE" || !strings.Contains(r.ErrorHint(), "Content-Type: application/json") || !strings.Contains(string(r.Raw), ct) {
			t.Errorf("%q: %d %s", ct, r.Status, r.Raw)
		}
	}
	if recs, err := e.Store.ListAudit(t.Context(), auditQuery("vantrow-bills", "route")); err != nil || len(recs) != 0 {
		t.Fatalf("a refused body was routed: %d records, %v", len(recs), err)
	}
	for i, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON", "application/merge-patch+json", ""} {
		if r := send("/v1/route", ct, agent, fmt.Sprintf(`{"step":"post_tms","item":"CT-%d"}`, i)); r.Status != 200 {
			t.Errorf("%q: %d %s", ct, r.Status, r.Raw)
		}
	}
	// /mcp: the go-sdk takes application/json only; the refusal is a
	// JSON-RPC error.
	for _, ct := range []string{"text/plain", ""} {
		m := send("/mcp", ct, agent, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		re := rpcErr(m)
		data, _ := re["data"].(map[string]any)
		if m.Status != 415 || re == nil || re["message"] != "UNSUPPORTED_MEDIA_TYPE" || data == nil || !strings.Contains(fmt.Sprint(data["hint"]), "application/json") {
			t.Errorf("/mcp %q: %d %s", ct, m.Status, m.Raw)
		}
	}
	if m := send("/mcp", "application/json; charset=utf-8", agent, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); m.Status != 200 || rpcErr(m) != nil {
		t.Errorf("/mcp with a charset: %d %.300s", m.Status, m.Raw)
	}
	// The console's form is not JSON and is not refused for it (without
	// the sign-in page's CSRF cookie it is refused by the console).
	if r := send("/console/signin", "application/x-www-form-urlencoded", "", "key=x&csrf=y"); r.Status == 415 || !strings.Contains(r.Header.Get("Content-Type"), "text/html") {
		t.Errorf("console form post: %d %s %.200s", r.Status, r.Header.Get("Content-Type"), r.Raw)
	}
	if v := metricValue(t, e, `ladder_refusals_total{code="UNSUPPORTED_MEDIA_TYPE",surface="rest"}`); v != 5 {
		t.Errorf("rest UNSUPPORTED_MEDIA_TYPE refusals = %v, want 5", v)
	}
	if v := metricValue(t, e, `ladder_refusals_total{code="UNSUPPORTED_MEDIA_TYPE",surface="mcp"}`); v != 2 {
		t.Errorf("mcp UNSUPPORTED_MEDIA_TYPE refusals = %v, want 2", v)
	}
}

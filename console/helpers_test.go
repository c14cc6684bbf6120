package console_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/ladderhq/ladder/internal/testenv"
)

const ws = "vantrow-bills"

// seeded starts the demo server with its 14 weeks of history.
func seeded(t *testing.T) *testenv.Env {
	t.Helper()
	return testenv.StartWith(t, "", testenv.Options{Seed: true})
}

// requestApproval has the agent propose a rate approval (rate_check is in
// propose) and returns the approval id.
func requestApproval(t *testing.T, e *testenv.Env, bill string) string {
	t.Helper()
	res := e.Do("POST", "/v1/capabilities/rates:approveRate/call", e.Keys[ws+"/agent"], map[string]any{
		"bill_id": bill, "linehaul_usd": 1850.0, "fuel_surcharge_usd": 212.5, "idempotency_key": "rate-" + bill})
	id, _ := res.Body["approval_id"].(string)
	if res.Status != http.StatusAccepted || id == "" {
		t.Fatalf("approval request: %d %s", res.Status, res.Raw)
	}
	return id
}

// sampledAudit routes items of read_bill (auto) until one is sampled for
// audit and returns its route id.
func sampledAudit(t *testing.T, e *testenv.Env, prefix string) string {
	t.Helper()
	for i := 0; i < 2000; i++ {
		res := e.Do("POST", "/v1/route", e.Keys[ws+"/agent"], map[string]any{"step": "read_bill", "item": fmt.Sprintf("%s-%04d", prefix, i),
			"features": map[string]any{"carrier": "Acme Freight", "total_usd": 2062.5}})
		if res.Status != http.StatusOK {
			t.Fatalf("route: %d %s", res.Status, res.Raw)
		}
		if res.Body["audit"] == true {
			return res.Body["route_id"].(string)
		}
	}
	t.Fatal("no item was sampled for audit")
	return ""
}

// client is a cookie-keeping HTTP client that does not follow redirects.
type client struct {
	t    *testing.T
	c    *http.Client
	base string
}

func newClient(t *testing.T, e *testenv.Env) *client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: e.Server.URL, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type resp struct {
	Status   int
	Body     string
	Location string
	Header   http.Header
}

func (c *client) get(path string) resp {
	c.t.Helper()
	r, err := c.c.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	return read(c.t, r)
}

func (c *client) post(path string, form url.Values) resp {
	c.t.Helper()
	r, err := c.c.PostForm(c.base+path, form)
	if err != nil {
		c.t.Fatal(err)
	}
	return read(c.t, r)
}

func read(t *testing.T, r *http.Response) resp {
	t.Helper()
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return resp{Status: r.StatusCode, Body: string(b), Location: r.Header.Get("Location"), Header: r.Header}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of the forms on a page.
func (c *client) csrf(path string) string {
	c.t.Helper()
	r := c.get(path)
	m := csrfRE.FindStringSubmatch(r.Body)
	if m == nil {
		c.t.Fatalf("no csrf token on %s (%d): %.300s", path, r.Status, r.Body)
	}
	return m[1]
}

// signin signs in with a key and returns the response to the POST.
func (c *client) signin(key string) resp {
	c.t.Helper()
	tok := c.csrf("/console/signin")
	return c.post("/console/signin", url.Values{"csrf": {tok}, "key": {key}})
}

// signedIn returns a client signed in with the workspace's human key.
func signedIn(t *testing.T, e *testenv.Env, workspace string) *client {
	t.Helper()
	c := newClient(t, e)
	r := c.signin(e.Keys[workspace+"/human"])
	if r.Status != http.StatusSeeOther || r.Location != "/console/inbox" {
		t.Fatalf("sign in: %d %s %.300s", r.Status, r.Location, r.Body)
	}
	return c
}

// action posts a form with the page's CSRF token.
func (c *client) action(page, path string, form url.Values) resp {
	c.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", c.csrf(page))
	return c.post(path, form)
}

func contains(t *testing.T, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("page lacks %q", w)
		}
	}
}

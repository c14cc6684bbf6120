package http_test

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

type isoConsole struct {
	t    *testing.T
	c    *http.Client
	base string
}

var isoCSRFRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func newIsoConsole(t *testing.T, e *testenv.Env) *isoConsole {
	jar, _ := cookiejar.New(nil)
	return &isoConsole{t: t, base: e.Server.URL, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (c *isoConsole) do(method, path string, form url.Values) isoAnswer {
	c.t.Helper()
	var r *http.Response
	var err error
	if method == "GET" {
		r, err = c.c.Get(c.base + path)
	} else {
		r, err = c.c.PostForm(c.base+path, form)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return isoAnswer{status: r.StatusCode, ctype: r.Header.Get("Content-Type"), loc: r.Header.Get("Location"), body: b}
}

func (c *isoConsole) csrf(path string) string {
	c.t.Helper()
	m := isoCSRFRE.FindSubmatch(c.do("GET", path, nil).body)
	if m == nil {
		c.t.Fatalf("no csrf token on %s", path)
	}
	return string(m[1])
}

func (c *isoConsole) signin(key string) isoAnswer {
	c.t.Helper()
	return c.do("POST", "/console/signin", url.Values{"csrf": {c.csrf("/console/signin")}, "key": {key}})
}

func (c *isoConsole) post(path string, form url.Values) isoAnswer {
	c.t.Helper()
	f := url.Values{}
	for k, v := range form {
		f[k] = v
	}
	f.Set("csrf", c.csrf("/console/inbox"))
	return c.do("POST", path, f)
}

func TestIsolationConsole(t *testing.T) {
	f := newIsoFixture(t)
	e := f.e
	clients := map[string]*isoConsole{}
	for _, a := range e.Svc.WorkspaceIDs() {
		c := newIsoConsole(t, e)
		if r := c.signin(e.Keys[a+"/human"]); r.status != http.StatusSeeOther || r.loc != "/console/inbox" {
			t.Fatalf("sign in to %s: %s", a, r)
		}
		clients[a] = c
	}
	for _, row := range isoConsoleRows() {
		t.Run(row.pattern, func(t *testing.T) {
			if row.list != nil {
				for _, a := range e.Svc.WorkspaceIDs() {
					c := clients[a]
					if row.public {
						c = newIsoConsole(t, e)
					}
					m, p, form := row.list()
					var ans isoAnswer
					if m == "GET" {
						ans = c.do(m, p, nil)
					} else {
						ans = c.post(p, form)
					}
					if ans.status >= 500 {
						t.Errorf("%s %s by %s: %s", m, p, a, ans)
					}
					isoAssertNoLeak(t, f, a, fmt.Sprintf("%s %s by %s", m, p, a), ans)
				}
				return
			}
			for _, pr := range row.probes {
				bv, nv := pr.value(f), isoAbsent(f, pr)
				for _, a := range isoOthers(f, pr) {
					c := clients[a]
					m1, p1, f1 := row.req(bv)
					m2, p2, f2 := row.req(nv)
					var got, want isoAnswer
					if m1 == "GET" {
						got, want = c.do(m1, p1, nil), c.do(m2, p2, nil)
					} else {
						got, want = c.post(p1, f1), c.post(p2, f2)
					}
					if row.pattern != "GET /console/gate" && got.status < 400 {
						t.Errorf("%s %s by %s on %s's %s: not refused: %.300s", m1, p1, a, pr.owners[0], pr.name, got)
					}
					if g, w := got.norm(bv, pr.loose), want.norm(nv, pr.loose); g.String() != w.String() {
						t.Errorf("%s by %s: %s's %s %q is answered unlike an id that exists isoNowhere:\n got  %.1500s\n none %.1500s", row.pattern, a, pr.owners[0], pr.name, bv, g, w)
					}
					isoAssertNoLeak(t, f, a, fmt.Sprintf("%s %s by %s", m1, p1, a), got.norm(bv, false))
				}
			}
		})
	}
	f.assertUntouched(t)
}

// TestIsolationConsoleSignin: only a human key signs in, and a person's
// session reaches their own workspace only.
func TestIsolationConsoleSignin(t *testing.T) {
	f := newIsoFixture(t)
	e := f.e
	for _, ws := range e.Svc.WorkspaceIDs() {
		for _, kind := range []string{"agent", "admin"} {
			c := newIsoConsole(t, e)
			r := c.signin(e.Keys[ws+"/"+kind])
			if r.status != http.StatusForbidden || r.loc != "" {
				t.Errorf("sign in with the %s key of %s: %s", kind, ws, r)
			}
			if r := c.do("GET", "/console/inbox", nil); r.status != http.StatusSeeOther || !strings.HasPrefix(r.loc, "/console/signin") {
				t.Errorf("%s key of %s reached the inbox: %s", kind, ws, r)
			}
		}
	}
	// A bad token and another workspace's revoked key get the same answer.
	c := newIsoConsole(t, e)
	tok := e.Keys[isoMirror+"/human"]
	r := e.Do("POST", "/v1/keys/"+isoKeyID(tok)+"/revoke", e.Keys[isoMirror+"/admin"], nil)
	if r.Status != http.StatusOK {
		t.Fatalf("revoke: %d %s", r.Status, r.Raw)
	}
	revoked := c.signin(tok)
	unknown := c.signin("ldr_" + isoNowhere(isoKeyID(tok)) + "_" + strings.Repeat("q", len(tok)-len(isoKeyID(tok))-5))
	if revoked.status != http.StatusUnauthorized || revoked.status != unknown.status {
		t.Errorf("revoked key: %s\nunknown key: %s", revoked, unknown)
	}
	// Sign out ends the session; a signed-out POST does nothing.
	a := newIsoConsole(t, e)
	if r := a.signin(e.Keys["checkcall-loads/human"]); r.status != http.StatusSeeOther {
		t.Fatal(r)
	}
	if r := a.post("/console/signout", nil); r.status != http.StatusSeeOther {
		t.Errorf("sign out: %s", r)
	}
	if r := a.do("POST", "/console/approvals/"+f.approvalID+"/approve", url.Values{}); r.status != http.StatusUnauthorized {
		t.Errorf("signed-out approve: %s", r)
	}
	f.assertUntouched(t)
}

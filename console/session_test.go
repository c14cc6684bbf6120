package console_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
)

// TestSigninNextStaysLocal signs in with hostile next= values and checks
// where the redirect goes: a clean path under /console/, or the inbox
// (issue 15: "/console/../%5Cevil.example" went to "/\evil.example",
// which a browser reads as http://evil.example/).
func TestSigninNextStaysLocal(t *testing.T) {
	e := testenv.Start(t, "")
	key := e.Keys[ws+"/human"]
	for _, tc := range []struct{ next, want string }{
		{`/console/../\evil.example`, "/console/inbox"},   // the reported break, as the form posts it
		{`/console/../%5Cevil.example`, "/console/inbox"}, // the same, still encoded
		{`/console/..%2F..%2Fevil.example`, "/console/inbox"},
		{`/console/%2e%2e/%2e%2e/evil.example`, "/console/inbox"},
		{`/console/../../evil.example`, "/console/inbox"},
		{`/console/./../steps`, "/console/inbox"},
		{`//evil.example/console/`, "/console/inbox"},
		{`/console//evil.example`, "/console/inbox"},
		{`/\evil.example`, "/console/inbox"},
		{`\\evil.example`, "/console/inbox"},
		{`/console/\\evil.example`, "/console/inbox"},
		{`/console/%5C%5Cevil.example`, "/console/inbox"},
		{"/console/\t/evil.example", "/console/inbox"},
		{"/console/inbox\r\nLocation: https://evil.example/", "/console/inbox"},
		{"/console/%0d%0aSet-Cookie:x=1", "/console/inbox"},
		{`https://evil.example/console/`, "/console/inbox"},
		{`http:/evil.example`, "/console/inbox"},
		{`javascript:alert(1)`, "/console/inbox"},
		{`/console@evil.example`, "/console/inbox"},
		{` /console/steps`, "/console/inbox"},
		{`/consoles/x`, "/console/inbox"},
		{`/`, "/console/inbox"},
		{``, "/console/inbox"},
		// Local paths are kept, cleaned; a fragment is dropped.
		{`/console/steps`, "/console/steps"},
		{`/console`, "/console/"},
		{`/console/steps/bills/../bills/read_bill`, "/console/steps/bills/read_bill"},
		{`/console/gate?case=release_payment&gate_state=PASS#top`, "/console/gate?case=release_payment&gate_state=PASS"},
	} {
		t.Run(tc.next, func(t *testing.T) {
			c := newClient(t, e)
			// The sign-in page keeps only a local next in its form.
			if page := c.get("/console/signin?next=" + url.QueryEscape(tc.next)); strings.Contains(page.Body, "evil") {
				t.Errorf("the sign-in form carries the hostile next: %.300s", page.Body[strings.Index(page.Body, `name="next"`)-40:])
			}
			tok := c.csrf("/console/signin")
			r := c.post("/console/signin", url.Values{"csrf": {tok}, "key": {key}, "next": {tc.next}})
			if r.Status != http.StatusSeeOther || r.Location != tc.want {
				t.Errorf("next %q: %d to %q, want %q", tc.next, r.Status, r.Location, tc.want)
			}
			if strings.Contains(r.Location, `\`) || strings.HasPrefix(r.Location, "//") || !strings.HasPrefix(r.Location, "/console/") {
				t.Errorf("next %q: Location %q leaves the console", tc.next, r.Location)
			}
		})
	}
	// A signed-out visit keeps its page as next, and signing in returns
	// to it.
	c := newClient(t, e)
	r := c.get("/console/steps/bills/read_bill")
	if r.Status != http.StatusSeeOther || r.Location != "/console/signin?next=%2Fconsole%2Fsteps%2Fbills%2Fread_bill" {
		t.Fatalf("signed-out step page: %d %s", r.Status, r.Location)
	}
	tok := c.csrf(r.Location)
	r = c.post("/console/signin", url.Values{"csrf": {tok}, "key": {key}, "next": {"/console/steps/bills/read_bill"}})
	if r.Location != "/console/steps/bills/read_bill" {
		t.Errorf("back to the page: %s", r.Location)
	}
}

// sessionCookie returns the client's console session cookie value.
func (c *client) sessionCookie() string {
	c.t.Helper()
	u, _ := url.Parse(c.base + "/console/")
	for _, ck := range c.c.Jar.Cookies(u) {
		if ck.Name == "ladder_console" {
			return ck.Value
		}
	}
	return ""
}

// withCookie returns a new client (another browser, or someone who copied
// the cookie) that sends the given session cookie value.
func withCookie(t *testing.T, base, value string) *client {
	t.Helper()
	c := clientAt(t, base)
	u, _ := url.Parse(base + "/console/")
	c.c.Jar.SetCookies(u, []*http.Cookie{{Name: "ladder_console", Value: value, Path: "/console/"}})
	return c
}

// clientAt is newClient for a server at base.
func clientAt(t *testing.T, base string) *client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// signedOut fails the test unless c is treated as signed out: pages send
// to the sign-in form, and a form post with the old token does nothing.
func signedOut(t *testing.T, c *client, what, csrf, approval string) {
	t.Helper()
	if r := c.get("/console/inbox"); r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Location, "/console/signin") {
		t.Errorf("%s: inbox %d %s, want the sign-in form", what, r.Status, r.Location)
	}
	r := c.post("/console/approvals/"+approval+"/approve", url.Values{"csrf": {csrf}, "mode": {"as-proposed"}})
	if r.Status != http.StatusUnauthorized || !strings.Contains(r.Body, "You are signed out, so nothing was done.") {
		t.Errorf("%s: approve with the old form token: %d %.300s", what, r.Status, r.Body)
	}
}

// TestSignoutEndsSession replays a session's cookie and its form token
// after sign-out: both are refused (issue 15: they kept working for up to
// 12 h).
func TestSignoutEndsSession(t *testing.T) {
	e := testenv.Start(t, "")
	ap := requestApproval(t, e, "B-77")
	c := signedIn(t, e, ws)
	old, tok := c.sessionCookie(), c.csrf("/console/inbox")
	// The cookie names no key: it carries a random session id.
	if id := ladder.KeyID(e.Keys[ws+"/human"]); old == "" || strings.Contains(old, id) {
		t.Errorf("session cookie %q carries the key id %s", old, id)
	}
	copyOf := withCookie(t, e.Server.URL, old)
	r := copyOf.get("/console/inbox")
	if r.Status != http.StatusOK {
		t.Fatalf("the copied cookie before sign-out: %d", r.Status)
	}
	// No page carries the session id, which the HttpOnly cookie keeps
	// from scripts.
	if parts := strings.Split(old, "."); len(parts) != 3 || strings.Contains(r.Body, parts[1]) {
		t.Errorf("the inbox carries the session id of cookie %q", old)
	}
	if r = c.post("/console/signout", url.Values{"csrf": {tok}}); r.Status != http.StatusSeeOther || r.Location != "/console/signin?done=signedout" {
		t.Fatalf("sign out: %d %s", r.Status, r.Location)
	}
	signedOut(t, copyOf, "the old cookie after sign-out", tok, ap)
	if v := e.Do("GET", "/v1/approvals/"+ap, e.Keys[ws+"/human"], nil); v.Body["status"] != "pending" {
		t.Errorf("approval %v after the replay", v.Body["status"])
	}
	// Signing out again with the old token does nothing either.
	if r := copyOf.post("/console/signout", url.Values{"csrf": {tok}}); r.Status != http.StatusUnauthorized {
		t.Errorf("sign out again: %d", r.Status)
	}
}

// TestSigninNewSession: every sign-in gets a new session id, whatever
// cookie the browser brought, and the form token of one session is
// refused in another.
func TestSigninNewSession(t *testing.T) {
	e := testenv.Start(t, "")
	ap := requestApproval(t, e, "B-78")
	attacker := signedIn(t, e, ws)
	planted, plantedTok := attacker.sessionCookie(), attacker.csrf("/console/inbox")
	// The victim's browser carries the planted cookie, then signs in.
	victim := withCookie(t, e.Server.URL, planted)
	if r := victim.signin(e.Keys[ws+"/human"]); r.Status != http.StatusSeeOther {
		t.Fatalf("sign in: %d", r.Status)
	}
	got := victim.sessionCookie()
	if got == "" || got == planted {
		t.Fatalf("sign-in kept the session id the browser brought (%q)", got)
	}
	// The victim's session does not take the attacker's form token.
	if r := victim.post("/console/approvals/"+ap+"/approve", url.Values{"csrf": {plantedTok}, "mode": {"as-proposed"}}); r.Status != http.StatusForbidden {
		t.Errorf("another session's token: %d", r.Status)
	}
	if r := victim.get("/console/inbox"); r.Status != http.StatusOK {
		t.Errorf("victim's inbox: %d", r.Status)
	}
}

// TestSessionExpiresAndIsSwept: a session ends at its expiry even though
// its cookie would still be sent, and the sweep deletes it.
func TestSessionExpiresAndIsSwept(t *testing.T) {
	e := testenv.Start(t, "")
	c := signedIn(t, e, ws)
	id := ladder.KeyID(e.Keys[ws+"/human"])
	e.Clock.Advance(12*time.Hour - time.Second)
	if r := c.get("/console/inbox"); r.Status != http.StatusOK {
		t.Fatalf("before expiry: %d", r.Status)
	}
	if n, err := e.Svc.DeleteExpiredSessions(context.Background()); err != nil || n != 0 {
		t.Errorf("sweep before expiry: %d %v", n, err)
	}
	e.Clock.Advance(2 * time.Second)
	if r := withCookie(t, e.Server.URL, c.sessionCookie()).get("/console/inbox"); r.Status != http.StatusSeeOther {
		t.Errorf("after expiry: %d", r.Status)
	}
	if n, err := e.Svc.DeleteExpiredSessions(context.Background()); err != nil || n != 1 {
		t.Errorf("sweep after expiry: deleted %d, %v; want 1", n, err)
	}
	recs, _ := e.Store.ListAudit(context.Background(), ladder.AuditQuery{Workspace: ws, Kind: ladder.AuditSessionStart})
	if len(recs) != 1 || recs[0].Actor != id {
		t.Errorf("sign-in records: %+v", recs)
	}
}

// TestSignoutEndsSessionOnEveryReplica runs two servers on one database
// (SQLite here; TestReplicasSessions does it on PostgreSQL): a session
// signed out, or whose key is revoked, on one is refused by the other.
func TestSignoutEndsSessionOnEveryReplica(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ladder.db")
	a := testenv.StartWith(t, "", testenv.Options{DBPath: db})
	b := testenv.StartWith(t, "", testenv.Options{DBPath: db})
	ap := requestApproval(t, a, "B-79")

	c := signedIn(t, a, ws)
	cookie, tok := c.sessionCookie(), c.csrf("/console/inbox")
	onB := withCookie(t, b.Server.URL, cookie)
	if r := onB.get("/console/inbox"); r.Status != http.StatusOK {
		t.Fatalf("the session on the other replica: %d", r.Status)
	}
	if r := c.post("/console/signout", url.Values{"csrf": {tok}}); r.Status != http.StatusSeeOther {
		t.Fatalf("sign out on A: %d", r.Status)
	}
	signedOut(t, onB, "replica B after sign-out on A", tok, ap)

	// Revoking the key on B ends its session on A.
	c = signedIn(t, a, ws)
	tok = c.csrf("/console/inbox")
	if _, err := b.Svc.RevokeKey(context.Background(), "test", ws, ladder.KeyID(a.Keys[ws+"/human"])); err != nil {
		t.Fatal(err)
	}
	signedOut(t, c, "replica A after the key was revoked on B", tok, ap)
}

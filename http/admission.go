package http

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/mcpwire"
	"github.com/ladderhq/ladder/internal/tracing"
)

// Admission defaults (see Options).
const (
	DefaultMaxInFlightPerKey     = 32
	DefaultMaxInFlightPerAddress = 32
	DefaultBodyTimeout           = 10 * time.Second
)

// slots counts the requests in progress per name (a key id or a client
// address) and refuses one over max. A name's entry goes when its count
// reaches zero, so memory follows the requests in progress, not every key
// or address ever seen. A nil *slots has no cap.
type slots struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func newSlots(limit, def int) *slots {
	if limit == 0 {
		limit = def
	}
	if limit < 0 {
		return nil
	}
	return &slots{max: limit, n: map[string]int{}}
}

func (s *slots) acquire(name string) bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[name] >= s.max {
		return false
	}
	s.n[name]++
	return true
}

func (s *slots) release(name string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[name] <= 1 {
		delete(s.n, name)
	} else {
		s.n[name]--
	}
}

// admit is the front door every request but the probes passes, in an order
// that keeps slow and keyless clients off the shared capacity:
//
//  1. A request with a body gets a read deadline (BodyTimeout) for the
//     whole body; the header was read under the server's ReadHeaderTimeout.
//  2. A bearer key is authenticated. On /v1/ a missing or bad key is
//     refused at once, before the body is read. On the mounts (/mcp,
//     /console/) a request without a valid key goes on as keyless: those
//     handlers answer a bad key in their own shape, and the console signs
//     people in with a form.
//  3. A /v1/ or /mcp body must be JSON (415 otherwise).
//  4. The request takes a slot of its key, or without a valid key of its
//     client address, and only then reads its body: a trickled body holds
//     its own key's or address's slot and nothing shared.
//  5. Then it takes a slot of the global cap for the handler's run.
//
// admit returns the request to serve (its body already read, the principal
// in its context) and the function that frees its slots, or ok false when
// it has answered the request itself.
func (s *Server) admit(w *statusWriter, r *http.Request) (_ *http.Request, release func(), ok bool) {
	path := r.URL.Path
	rest := path == "/v1" || strings.HasPrefix(path, "/v1/")
	hasBody := r.ContentLength != 0
	bodyUnread := hasBody
	var rc *http.ResponseController
	if hasBody && s.bodyTimeout > 0 {
		rc = http.NewResponseController(w)
		// Also bounds net/http's drain of a body a refusal left unread
		// (it reads up to 256 KiB before closing). A writer without deadlines
		// (httptest.ResponseRecorder in the stdio bridge) has its body in
		// memory; the error does not matter.
		_ = rc.SetReadDeadline(time.Now().Add(s.bodyTimeout))
	}
	release = func() {}
	refuse := func(e *ladder.Error) (*http.Request, func(), bool) {
		release()
		s.refuseAtDoor(w, r, e, bodyUnread)
		return nil, nil, false
	}

	var p ladder.Principal
	authed, hinted := false, false
	// One reading of the header: the token, or why there is none.
	tok, berr := ladder.BearerToken(mcpwire.HeaderValue(r.Header, "Authorization"))
	if tok != "" {
		// Key lookups are bounded too: with a hung store they would pile
		// up, unbounded, before any other cap.
		if !tryAcquire(s.lookups) {
			return refuse(overloaded())
		}
		actx, sp := tracing.Start(r.Context(), s.tracer, tracing.SpanAuthenticate)
		var err error
		if r.Method == http.MethodPost && (path == "/mcp" || path == "/v1/route") {
			// The MCP surface and POST /v1/route (authChecked) confirm a
			// key taken from the view of verified keys at its commit, or
			// before they answer.
			p, hinted, err = s.svc.AuthenticateHint(actx, tok)
		} else {
			p, err = s.svc.Authenticate(actx, tok)
		}
		if sp.Recording() && err == nil {
			sp.Set(tracing.Workspace.String(p.Workspace), tracing.KeyID.String(p.KeyID))
		}
		sp.End(err)
		freeSlot(s.lookups)
		switch {
		case err == nil:
			authed = true
			w.keyID = p.KeyID
		case rest:
			return refuse(ladder.AsError(err))
		}
	} else if rest {
		if berr != nil {
			return refuse(berr)
		}
		_, err := s.svc.Authenticate(r.Context(), "")
		return refuse(ladder.AsError(err))
	}

	if hasBody {
		ct := mcpwire.HeaderValue(r.Header, "Content-Type")
		switch {
		case rest && path == "/v1/import":
			// An import's body is a file, JSON lines or CSV; its handler
			// checks the format.
		case rest && ct != "" && !jsonMediaType(ct):
			return refuse(&ladder.Error{Code: ladder.CodeUnsupportedMedia, Message: fmt.Sprintf("The body's Content-Type is %q, not JSON.", ct),
				Hint: "send the body as JSON with the header Content-Type: application/json (curl: -H 'Content-Type: application/json'); nothing was done", Data: map[string]any{"content_type": ct}})
		case path == "/mcp" && r.Method == http.MethodPost && mediaType(ct) != "application/json":
			// The go-sdk accepts application/json only; say so in ladder's
			// words before reading the body.
			return refuse(&ladder.Error{Code: ladder.CodeUnsupportedMedia, Message: fmt.Sprintf("The body's Content-Type is %q, not application/json.", ct),
				Hint: "POST one JSON-RPC request with Content-Type: application/json and Accept: application/json, text/event-stream", Data: map[string]any{"content_type": ct}})
		}
	}

	slot, name := s.perKey, p.KeyID
	if !authed {
		slot, name = s.perAddr, clientAddress(r.RemoteAddr)
	}
	if !slot.acquire(name) {
		if authed {
			return refuse(&ladder.Error{Code: ladder.CodeRateLimited, Message: fmt.Sprintf("This key already has %d requests in progress, the most it may have at once.", slot.max),
				Hint: "nothing was done; wait for one of this key's requests to finish and send again after 1 s (Retry-After)",
				Data: map[string]any{"retry_after_seconds": 1, "max_in_flight_per_key": slot.max}})
		}
		return refuse(&ladder.Error{Code: ladder.CodeRateLimited, Message: fmt.Sprintf("This address already has %d requests without a valid key in progress, the most it may have at once.", slot.max),
			Hint: "nothing was done; send again after 1 s (Retry-After); a request with a valid bearer key counts against its key instead",
			Data: map[string]any{"retry_after_seconds": 1, "max_in_flight_per_address": slot.max}})
	}
	release = func() { slot.release(name) }

	if hasBody {
		if rc != nil {
			// Afresh: the time the key lookup took is not the body's.
			_ = rc.SetReadDeadline(time.Now().Add(s.bodyTimeout))
		}
		data, err := readBody(r.Body, r.ContentLength)
		if isTimeout(err) {
			return refuse(&ladder.Error{Code: ladder.CodeBodyTimeout, Message: fmt.Sprintf("The request body did not arrive within %s.", s.bodyTimeout),
				Hint: "nothing was done; send the whole body at once and retry (a body is read under a " + s.bodyTimeout.String() + " deadline)"})
		}
		bodyUnread = false
		if err != nil {
			// Too large or cut off: the handler answers from the error, and
			// the connection closes instead of draining what is left.
			w.Header().Set("Connection", "close")
		}
		// A body read to its end needs no lifting of the deadline:
		// net/http clears it when it starts its background read.
		r.Body = &replayBody{Reader: bytes.NewReader(data), data: data, err: err}
	}

	if s.inflight != nil {
		select {
		case s.inflight <- struct{}{}:
			prev := release
			release = func() { <-s.inflight; prev() }
		default:
			return refuse(overloaded())
		}
	}
	if authed {
		// The MCP surface behind this door takes the key as verified here
		// rather than reading it again in the same request. A hinted key
		// is a REST handler's principal only through authChecked, which
		// confirms it; every other handler reads the key again (auth).
		ctx := r.Context()
		if !hinted {
			ctx = context.WithValue(ctx, principalKey{}, p)
		}
		r = r.WithContext(ladder.WithVerifiedKey(ctx, tok, p, hinted))
	}
	return r, release, true
}

func overloaded() *ladder.Error {
	return &ladder.Error{Code: ladder.CodeOverloaded, Message: "The server is serving as many requests as it may at once, so this one was not started.",
		Hint: "nothing was done; retry after a second", Data: map[string]any{"retry_after_seconds": 1}}
}

// refuseAtDoor answers a request admit refused: on /mcp as a JSON-RPC error
// (id null: the body was not read), elsewhere as a REST error. A body left
// unread is not drained: the connection closes after the answer.
func (s *Server) refuseAtDoor(w *statusWriter, r *http.Request, e *ladder.Error, bodyUnread bool) {
	if bodyUnread {
		w.Header().Set("Connection", "close")
	}
	if r.URL.Path == "/mcp" {
		s.writeRPCRefusal(w, e)
	} else {
		s.writeError(w, r, e)
	}
	route := "admission"
	if e.Code == ladder.CodeOverloaded {
		route = "overloaded"
	}
	s.requests.WithLabelValues(route, r.Method, strconv.Itoa(w.status)).Inc()
}

// rpcRefusal is the JSON-RPC error shape of the MCP surface.
type rpcRefusal struct {
	JSONRPC string `json:"jsonrpc"`
	ID      any    `json:"id"`
	Error   struct {
		Code    int            `json:"code"`
		Message ladder.Code    `json:"message"`
		Data    map[string]any `json:"data"`
	} `json:"error"`
}

// writeRPCRefusal writes e as the MCP surface writes a refusal: message and
// data.code are the refusal name, data has the sentence and the hint.
func (s *Server) writeRPCRefusal(w http.ResponseWriter, e *ladder.Error) {
	e = e.Render(ladder.SurfaceMCP)
	s.refusals.WithLabelValues("mcp", string(e.Code)).Inc()
	if ra, ok := e.Data["retry_after_seconds"]; ok {
		w.Header().Set("Retry-After", fmt.Sprint(ra))
	}
	var body rpcRefusal
	body.JSONRPC = "2.0"
	body.Error.Code, body.Error.Message = e.RPCCode, e.Code
	if body.Error.Code == 0 {
		body.Error.Code = s.rpcCode(e.Code)
	}
	body.Error.Data = map[string]any{"code": e.Code, "message": e.Message, "hint": e.Hint}
	for k, v := range e.Data {
		body.Error.Data[k] = v
	}
	writeJSON(w, Status(e.Code), body)
}

// replayBody serves a body admit has read, then the error that ended the
// read (none: io.EOF), so handlers see what they would have seen reading
// it themselves — a *http.MaxBytesError for a body over the limit, say.
type replayBody struct {
	*bytes.Reader
	data []byte
	err  error
}

// Bytes returns what is left of the body, then the error that ended its
// read, and leaves the body read to its end: the MCP handler takes a body
// this way rather than copying it again.
func (b *replayBody) Bytes() ([]byte, error) {
	rest := b.data[len(b.data)-b.Len():]
	b.Reset(nil)
	return rest, b.err
}

// readBody reads body to its end. A body that states a length up to
// sizedBodyBytes (as every JSON client's call does) is read into a buffer
// of that size, one allocation; io.ReadAll's doubling from 512 bytes is
// for the rest.
func readBody(body io.Reader, length int64) ([]byte, error) {
	if length <= 0 || length > sizedBodyBytes {
		return io.ReadAll(body)
	}
	// One byte more than stated, so the read that meets the end has room
	// and a body longer than it said still comes out whole.
	b := make([]byte, 0, length+1)
	for {
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			rest, err := io.ReadAll(body)
			return append(b, rest...), err
		}
	}
}

func (b *replayBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err == io.EOF && b.err != nil {
		return n, b.err
	}
	return n, err
}

func (b *replayBody) Close() error { return nil }

// sizedBodyBytes is the largest stated length readBody allocates for
// before the bytes arrive. Above it the buffer grows with what comes: a
// client stating 1 MiB and sending nothing would otherwise make the
// server hold 1 MiB for a request's header alone, slot after slot.
const sizedBodyBytes = 16 << 10

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func tryAcquire(c chan struct{}) bool {
	if c == nil {
		return true
	}
	select {
	case c <- struct{}{}:
		return true
	default:
		return false
	}
}

func freeSlot(c chan struct{}) {
	if c != nil {
		<-c
	}
}

// mediaType returns the media type of a Content-Type value without its
// parameters, or "" when there is none or it does not parse.
func mediaType(ct string) string {
	if ct == "application/json" {
		return ct // nearly every request's; ParseMediaType would build a map to say so
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ""
	}
	return mt
}

// jsonMediaType reports whether a Content-Type names JSON: application/json
// or a structured +json type, with any parameters.
func jsonMediaType(ct string) bool {
	mt := mediaType(ct)
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// clientAddress names a client for the per-address cap: its IP, or for
// IPv6 its /64, since one host commonly holds a whole /64. Proxy headers
// (X-Forwarded-For) are not trusted: any client can send them.
func clientAddress(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.WithZone("").Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}

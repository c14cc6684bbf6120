package http

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/ladderhq/ladder"
)

// auditRoutes registers the audit trail's REST endpoints: the filtered
// list, the chain's state and the streaming export. People (human keys)
// and admins read them; agents do not.
func (s *Server) auditRoutes() {
	s.handle("GET /v1/audit", s.auth(s.auditList, ladder.KeyHuman, ladder.KeyAdmin))
	s.handle("GET /v1/audit/verify", s.auth(s.auditVerify, ladder.KeyHuman, ladder.KeyAdmin))
	s.handle("GET /v1/audit/export", s.auth(s.auditExport, ladder.KeyHuman, ladder.KeyAdmin))
}

// auditRequest reads the audit filters from q, refusing a parameter it
// does not know (allowed lists the others it takes) and a limit that is not
// a whole number.
func auditRequest(q url.Values, allowed ...string) (ladder.AuditListRequest, error) {
	known := map[string]bool{"kind": true, "actor": true, "step": true, "since": true, "until": true}
	for _, a := range allowed {
		known[a] = true
	}
	for name := range q {
		if !known[name] {
			return ladder.AuditListRequest{}, ladder.InvalidField(name, "The query parameter "+strconv.Quote(name)+" is not one this endpoint takes.",
				"filter with kind, actor, step, since, until; the list pages with limit and cursor, the export takes format")
		}
	}
	req := ladder.AuditListRequest{Kind: q.Get("kind"), Actor: q.Get("actor"), Step: q.Get("step"), Since: q.Get("since"), Until: q.Get("until"), Cursor: q.Get("cursor")}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			return req, ladder.InvalidField("limit", "The limit "+strconv.Quote(l)+" is not a positive whole number.", "send a limit from 1 to 500 (default 50)")
		}
		req.Limit = n
	}
	return req, nil
}

func (s *Server) auditList(w http.ResponseWriter, r *http.Request) error {
	req, err := auditRequest(r.URL.Query(), "limit", "cursor")
	if err != nil {
		return err
	}
	page, err := s.svc.AuditList(r.Context(), principal(r), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) auditVerify(w http.ResponseWriter, r *http.Request) error {
	for name := range r.URL.Query() {
		return ladder.InvalidField(name, "The query parameter "+strconv.Quote(name)+" is not one this endpoint takes.", "send GET /v1/audit/verify with no parameters")
	}
	// A long chain takes a while to walk before the one answer is written.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(streamStall))
	res, err := s.svc.AuditVerify(r.Context(), principal(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

const (
	// exportFlushEvery is how many records an export writes between
	// flushes, so a client sees the export arrive without a flush per line.
	exportFlushEvery = 100
	// streamStall is how long an export may go without its client taking
	// a flush, and a verify without answering. Each replaces the server's
	// WriteTimeout for its request: an export of any length runs while the
	// client reads, and a stalled client is still cut off.
	streamStall = 2 * time.Minute
)

// auditExport streams the records as JSON lines or CSV. A refusal found
// before the first byte is written is an ordinary error answer; a failure
// after it aborts the response, so the client sees a cut-off transfer
// instead of a short export that looks whole.
func (s *Server) auditExport(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if q.Get("format") == ladder.AuditFormatLog {
		return s.auditLogExport(w, r)
	}
	req, err := auditRequest(q, "format")
	if err != nil {
		return err
	}
	format := q.Get("format")
	if format == "" {
		format = ladder.AuditFormatJSONL
	}
	enc, err := ladder.NewAuditEncoder(w, format)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(streamStall))
	started, n := false, 0
	start := func() error {
		if started {
			return nil
		}
		started = true
		name := "ladder-audit-" + principal(r).Workspace + "." + format
		w.Header().Set("Content-Type", enc.ContentType())
		w.Header().Set("Content-Disposition", `attachment; filename="`+safeFilename(name)+`"`)
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		return enc.Begin()
	}
	err = s.svc.AuditExport(r.Context(), principal(r), req, func(rec ladder.AuditRecord) error {
		if err := start(); err != nil {
			return err
		}
		if err := enc.Encode(rec); err != nil {
			return err
		}
		if n++; n%exportFlushEvery == 0 {
			if err := enc.Flush(); err != nil {
				return err
			}
			if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
				return err
			}
			_ = rc.SetWriteDeadline(time.Now().Add(streamStall))
		}
		return nil
	})
	if err == nil {
		err = start()
	}
	if err == nil {
		err = enc.Flush()
	}
	if err != nil && !started {
		return err
	}
	if err != nil {
		s.log.WarnContext(r.Context(), "audit export cut off", "err", err, "records", n)
		panic(http.ErrAbortHandler)
	}
	_ = rc.Flush()
	return nil
}

// safeFilename keeps the letters, digits and -_. of name, so a workspace
// id cannot break the Content-Disposition header.
func safeFilename(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}

package http

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/ladderhq/ladder"
)

// tlogRoutes registers the transparency log's endpoints (docs/audit-log.md):
// the checkpoint public key for anyone, and for people and admins of a
// workspace its latest signed checkpoint, a record's inclusion proof and
// consistency proofs between two tree sizes.
func (s *Server) tlogRoutes() {
	s.handle("GET /.well-known/ladder-checkpoint-key", s.checkpointKey)
	s.handle("GET /v1/audit/checkpoint", s.auth(s.auditCheckpoint, ladder.KeyHuman, ladder.KeyAdmin))
	s.handle("GET /v1/audit/records/{seq}/proof", s.auth(s.auditProof, ladder.KeyHuman, ladder.KeyAdmin))
	s.handle("GET /v1/audit/consistency", s.auth(s.auditConsistency, ladder.KeyHuman, ladder.KeyAdmin))
}

// checkpointKey serves the checkpoint public key as one line of text, the
// signed-note verifier key `ladder audit verify-export --key` takes.
func (s *Server) checkpointKey(w http.ResponseWriter, r *http.Request) error {
	key := s.svc.CheckpointKey()
	if key == "" {
		return ladder.NotFound(ladder.CodeNotFound, "This server signs no checkpoints: it runs with --unsigned-audit.", "ask the operator to start it with a checkpoint key")
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, err := io.WriteString(w, key+"\n")
	return err
}

// noParams refuses any query parameter.
func noParams(r *http.Request, endpoint string) error {
	for name := range r.URL.Query() {
		return ladder.InvalidField(name, "The query parameter "+strconv.Quote(name)+" is not one this endpoint takes.", "send "+endpoint+" with no parameters")
	}
	return nil
}

func (s *Server) auditCheckpoint(w http.ResponseWriter, r *http.Request) error {
	if err := noParams(r, "GET /v1/audit/checkpoint"); err != nil {
		return err
	}
	cp, err := s.svc.AuditCheckpoint(r.Context(), principal(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cp)
	return nil
}

func (s *Server) auditProof(w http.ResponseWriter, r *http.Request) error {
	if err := noParams(r, "GET /v1/audit/records/{seq}/proof"); err != nil {
		return err
	}
	raw := r.PathValue("seq")
	seq, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || seq < 1 {
		return ladder.InvalidField("seq", "The record number "+strconv.Quote(raw)+" is not a positive whole number.", "send the seq of a record GET /v1/audit lists")
	}
	p, err := s.svc.AuditProof(r.Context(), principal(r), seq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) auditConsistency(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	sizes := map[string]int64{}
	for name := range q {
		if name != "from" && name != "to" {
			return ladder.InvalidField(name, "The query parameter "+strconv.Quote(name)+" is not one this endpoint takes.", "send from and to, two tree sizes")
		}
	}
	for _, name := range []string{"from", "to"} {
		raw := q.Get(name)
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return ladder.InvalidField(name, "The tree size "+name+"="+strconv.Quote(raw)+" is not a whole number.", "send from and to, two tree sizes with 1 ≤ from ≤ to")
		}
		sizes[name] = n
	}
	c, err := s.svc.AuditConsistency(r.Context(), principal(r), sizes["from"], sizes["to"])
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

// auditLogExport streams the workspace's log (ladder.AuditFormatLog). The
// checkpoint is signed before the first byte, so a refusal is an ordinary
// answer; a failure after it aborts the response.
func (s *Server) auditLogExport(w http.ResponseWriter, r *http.Request) error {
	for name := range r.URL.Query() {
		if name != "format" {
			return ladder.InvalidField(name, "The query parameter "+strconv.Quote(name)+" does not go with format=log: the log is exported whole.", "send GET /v1/audit/export?format=log alone")
		}
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(streamStall))
	started := false
	err := s.svc.AuditLogExport(r.Context(), principal(r), func() io.Writer {
		started = true
		name := "ladder-audit-log-" + principal(r).Workspace + ".jsonl"
		w.Header().Set("Content-Type", "application/jsonl")
		w.Header().Set("Content-Disposition", `attachment; filename="`+safeFilename(name)+`"`)
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		return w
	})
	if err != nil && !started {
		return err
	}
	if err != nil {
		s.log.WarnContext(r.Context(), "audit log export cut off", "err", err)
		panic(http.ErrAbortHandler)
	}
	return nil
}

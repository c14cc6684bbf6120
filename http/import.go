package http

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/service"
)

// importRoutes registers the import of past records: admin keys only, since
// an import writes a step's record as a person's reviews would.
func (s *Server) importRoutes() {
	s.handle("POST /v1/import", s.auth(s.importHistory, ladder.KeyAdmin))
}

// importFormats maps an import body's Content-Type to its format.
var importFormats = map[string]string{
	"application/x-ndjson": ladder.ImportFormatJSONL,
	"application/jsonl":    ladder.ImportFormatJSONL,
	"text/csv":             ladder.ImportFormatCSV,
}

// importHistory imports the body (JSON lines or CSV, by ?format= or else
// the Content-Type) into
// the admin key's workspace; an all-workspaces key names it with
// ?workspace=.
func (s *Server) importHistory(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	q := r.URL.Query()
	for name := range q {
		if name != "workspace" && name != "format" {
			return ladder.InvalidField(name, "The query parameter "+strconv.Quote(name)+" is not one this endpoint takes.", "send POST /v1/import with workspace (for an all-workspaces admin key) and format (when the Content-Type does not say it)")
		}
	}
	ws := q.Get("workspace")
	switch scope := adminScope(p); {
	case scope == service.AllWorkspaces && ws == "":
		return ladder.InvalidField("workspace", "An all-workspaces admin key must name the workspace to import into.", "send POST /v1/import?workspace=ID")
	case scope == service.AllWorkspaces:
	case ws != "" && ws != scope:
		return &ladder.Error{Code: ladder.CodeWorkspaceRefused, Message: "This admin key manages workspace " + scope + " only.", Hint: "import into " + scope + ", or use an all-workspaces admin key"}
	default:
		ws = scope
	}
	// ?format= wins over the Content-Type, for clients (curl --data-binary)
	// that send a form type by default.
	format := q.Get("format")
	if format == "" {
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		var ok bool
		if format, ok = importFormats[mt]; !ok {
			return &ladder.Error{Code: ladder.CodeUnsupportedMedia, Message: fmt.Sprintf("The Content-Type %q is not an import format.", mt),
				Hint: "send JSON lines as application/x-ndjson or CSV with a header row as text/csv, or say ?format=jsonl or ?format=csv", Data: map[string]any{"content_type": mt}}
		}
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return &ladder.Error{Code: ladder.CodeBodyTooLarge, Message: fmt.Sprintf("The body is over %d bytes.", MaxBodyBytes), Hint: "split the file and import the parts in time order, or use ladder import --db on the server's database"}
		}
		return ladder.Errorf(ladder.CodeInvalidJSON, "resend the request", "Could not read the body: %v.", err)
	}
	res, err := s.svc.Import(r.Context(), p, ladder.ImportRequest{Workspace: ws, Format: format, Data: data})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

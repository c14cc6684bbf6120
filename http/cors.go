package http

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/ladderhq/ladder/internal/mcpwire"
)

// CORS for browser-based MCP clients (the MCP Inspector's web UI, agents
// in a web page): they must read a 401's WWW-Authenticate to find the
// Protected Resource Metadata, then the metadata itself, then /mcp's
// answers. Only those paths answer cross-origin; the REST API and the
// console never do.
//
// No answer ever carries Access-Control-Allow-Credentials, so a browser
// never lets another origin read an answer to a request that carried
// cookies: the console's session cookie cannot be used from another site
// (and /mcp reads only the Authorization header, which a page must set
// itself; a bearer token is not an ambient credential). The metadata is
// public, so any origin may read it; /mcp answers only the origins it
// accepts anyway (OriginAllowed: its own host and server.allowed_origins,
// the DNS-rebinding rule), so CORS opens nothing the Origin check shuts.

// metadataPrefix is where RFC 9728 metadata is served (package oauth's
// MetadataPath; this package cannot import it).
const metadataPrefix = "/.well-known/oauth-protected-resource"

// corsExposed are the response headers a cross-origin /mcp client may
// read: the challenge that leads to the metadata, the session and
// protocol headers of streamable HTTP, and the back-off of a refusal.
const corsExposed = "WWW-Authenticate, Mcp-Session-Id, Mcp-Protocol-Version, Retry-After"

// OriginAllowed reports whether a browser at origin may call /mcp on a
// request for host: no Origin (not a browser), the server's own host, or
// one of allowed ("*" allows all).
func OriginAllowed(origin, host string, allowed []string) bool {
	if origin == "" {
		return true
	}
	for _, o := range allowed {
		if o == origin || o == "*" {
			return true
		}
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && u.Host == host
}

// cors adds the CORS headers of /mcp and the metadata paths and answers
// their preflight requests, before admission (a preflight carries no
// credentials and no body, and costs nothing to answer).
func (s *Server) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := mcpwire.HeaderValue(r.Header, "Origin")
		path := r.URL.Path
		metadata := path == metadataPrefix || strings.HasPrefix(path, metadataPrefix+"/")
		if origin == "" || (!metadata && path != "/mcp") {
			next.ServeHTTP(w, r)
			return
		}
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		h := w.Header()
		h.Add("Vary", "Origin")
		switch {
		case metadata:
			h.Set("Access-Control-Allow-Origin", "*")
			if preflight {
				h.Set("Access-Control-Allow-Methods", "GET, HEAD")
				h.Set("Access-Control-Allow-Headers", "Mcp-Protocol-Version, Accept")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		case OriginAllowed(origin, r.Host, s.allowedOrigins):
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Expose-Headers", corsExposed)
			if preflight {
				// GET and DELETE too, so a client probing for a stream or
				// ending a session reads /mcp's 405 instead of a CORS error.
				h.Set("Access-Control-Allow-Methods", "POST, GET, DELETE")
				h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		case preflight:
			// Refused: no CORS headers, so the browser sends nothing. The
			// actual request would be refused ORIGIN_REFUSED by /mcp.
			http.Error(w, "This origin is not allowed to call /mcp; add it to server.allowed_origins.", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

package oauth

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/ladderhq/ladder"
)

// MetadataPath is where RFC 9728 Protected Resource Metadata is served;
// the /mcp endpoint's is MetadataPath + "/mcp" (the path form).
const MetadataPath = "/.well-known/oauth-protected-resource"

// Metadata is the Protected Resource Metadata document (RFC 9728 §2).
type Metadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name"`
	ResourceDocumentation  string   `json:"resource_documentation,omitempty"`
}

// Metadata returns the document for a resource path: "" for the server,
// "/mcp" for the MCP endpoint.
func (v *Verifier) Metadata(path string) Metadata {
	m := Metadata{Resource: v.id.Resource + path, BearerMethodsSupported: []string{"header"}, ResourceName: "ladder"}
	seen := map[string]bool{}
	for _, is := range v.id.Issuers {
		m.AuthorizationServers = append(m.AuthorizationServers, is.URL)
		for _, s := range is.Scopes {
			if !seen[s] {
				seen[s] = true
				m.ScopesSupported = append(m.ScopesSupported, s)
			}
		}
	}
	return m
}

// MetadataHandler serves MetadataPath and MetadataPath + "/mcp" (mount it
// on both). Anyone may read them, from any origin (package http answers
// their CORS): they say where to get a token, nothing more.
func (v *Verifier) MetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		rest := strings.TrimPrefix(r.URL.Path, MetadataPath)
		if rest != "" && rest != "/mcp" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_ = json.NewEncoder(w).Encode(v.Metadata(rest))
	})
}

// Challenge is the WWW-Authenticate value of a 401 (or of a 403 for a
// missing scope) on path (RFC 6750 §3, RFC 9728 §5.1): Bearer with the
// resource_metadata URL, plus error="invalid_token" and the refusal's
// message as error_description when a token was sent and refused.
func (v *Verifier) Challenge(path string, e *ladder.Error) string {
	meta := v.id.Resource + MetadataPath
	if path == "/mcp" || strings.HasPrefix(path, "/mcp/") {
		meta += "/mcp"
	}
	out := `Bearer realm="ladder", resource_metadata="` + quoteSafe(meta) + `"`
	switch e.Code {
	case ladder.CodeKeyInvalid:
		out += `, error="invalid_token", error_description="` + quoteSafe(e.Message) + `"`
	case ladder.CodeScopeMissing:
		var scopes []string
		for _, is := range v.id.Issuers {
			scopes = append(scopes, is.Scopes...)
		}
		out += `, error="insufficient_scope", error_description="` + quoteSafe(e.Message) + `"`
		if len(scopes) > 0 {
			out += `, scope="` + quoteSafe(strings.Join(scopes, " ")) + `"`
		}
	}
	return out
}

// quoteSafe keeps the characters RFC 6750 allows in a quoted
// error_description (%x20-21 / %x23-5B / %x5D-7E): a double quote becomes
// a single one, a backslash a slash, anything else outside the range '?'.
func quoteSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteByte('\'')
		case r == '\\':
			b.WriteByte('/')
		case r == '…':
			b.WriteString("...")
		case r < 0x20 || r > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

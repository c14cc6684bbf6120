package console

import (
	"fmt"
	"html/template"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/ladderhq/ladder"
)

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"pct": func(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) },
	"num": func(x float64) string { return fmt.Sprintf("%.4g", x) },
	"f2":  func(x float64) string { return fmt.Sprintf("%.2f", x) },
	"numbers": func(m map[string]float64) string {
		var parts []string
		for _, k := range sortedKeys(m) {
			parts = append(parts, fmt.Sprintf("%s %.4g", strings.ReplaceAll(k, "_", " "), m[k]))
		}
		if len(parts) == 0 {
			return "—"
		}
		return strings.Join(parts, ", ")
	},
	"lane": func(l ladder.Lane) string { return strings.ReplaceAll(string(l), "_", " ") },
	"short": func(s string) string {
		if len(s) > 16 {
			return s[:16] + "…"
		}
		return s
	},
	"inputType": func(t string) string {
		switch t {
		case "number", "integer":
			return "number"
		}
		return "text"
	},
	"multiline": func(t string) bool { return t == "object" || t == "array" || t == "" },
	"isErr":     func(e *ladder.Error) bool { return e != nil },
	"reviewForm": func(id, csrf string) reviewFormData {
		return reviewFormData{ID: id, CSRF: csrf}
	},
	"reviewFormOf": func(id, csrf string, form, errs map[string]string) reviewFormData {
		return reviewFormData{ID: id, CSRF: csrf, Verdict: form["verdict"], Severity: form["severity"], Correction: form["correction"], Note: form["note"], Errors: errs}
	},
}

// reviewFormData fills the review form partial.
type reviewFormData struct {
	ID, CSRF, Verdict, Severity, Correction, Note string
	Errors                                        map[string]string
}

func sortedKeys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// parsePages parses each page template with the layout and the partials.
func parsePages() map[string]*template.Template {
	base := template.Must(template.New("").Funcs(funcs).ParseFS(assets, "assets/templates/_*.html"))
	names, err := fs.Glob(assets, "assets/templates/*.html")
	if err != nil {
		panic(err)
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		b := path.Base(n)
		if strings.HasPrefix(b, "_") {
			continue
		}
		t := template.Must(template.Must(base.Clone()).ParseFS(assets, n))
		pages[strings.TrimSuffix(b, ".html")] = t
	}
	return pages
}

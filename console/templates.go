package console

import (
	"fmt"
	"html/template"
	"io/fs"
	"path"
	"strings"
	"sync"
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
	// day and clock split a time so a table cell can keep each on one line.
	"day":   func(t time.Time) string { return t.UTC().Format("2006-01-02") },
	"clock": func(t time.Time) string { return t.UTC().Format("15:04 UTC") },
	"count": func(n any) string { return groupDigits(fmt.Sprint(n)) },
	"age":   age,
	"usd":   usd,
	// codeBreaks lets a long code such as ORDERING_PRECONDITION_UNMET
	// wrap after its underscores rather than mid-word.
	"codeBreaks": func(s string) template.HTML {
		return template.HTML(strings.ReplaceAll(template.HTMLEscapeString(s), "_", "_<wbr>"))
	},
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

// groupDigits puts thousands separators into the integer part of a
// decimal number as text: 12345.5 → 12,345.5.
func groupDigits(s string) string {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	whole, frac, hasFrac := strings.Cut(s, ".")
	if len(whole) <= 3 || strings.ContainsAny(whole, "eE") {
		return sign + s
	}
	var b strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if hasFrac {
		return sign + b.String() + "." + frac
	}
	return sign + b.String()
}

// usd formats an amount of US dollars: 2450 → $2,450.00.
func usd(x float64) string {
	if x < 0 {
		return "−$" + groupDigits(fmt.Sprintf("%.2f", -x))
	}
	return "$" + groupDigits(fmt.Sprintf("%.2f", x))
}

// age says how long ago t was, in the largest whole unit: "3 h", "2 d".
func age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "under a minute"
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d/time.Hour))
	}
	return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
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

// pages is every page's template, parsed on the console's first page: a
// process that serves agents and never a person keeps none of them (about
// 0.9 MB of heap, BENCHMARKS.md, issue 22, session 44). Every console
// test renders pages, so a template that does not parse fails them.
var pages = sync.OnceValue(parsePages)

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

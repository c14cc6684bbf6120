package ladder

import (
	"sort"
	"strings"
	"unicode"
)

// FoldName folds a step name for matching: lower case, letters and digits
// only, so "Decide hold/release" and "decide-hold release" compare equal.
func FoldName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// MatchStep finds a step among steps by id, then by plain name case- and
// punctuation-insensitively, then by containment (seed 000). It returns the
// matches of the first rule that finds any: one is a match, several are
// ambiguous.
func MatchStep(steps []Step, query string) []Step {
	for _, st := range steps {
		if st.ID == query {
			return []Step{st}
		}
	}
	q := FoldName(query)
	if q == "" {
		return nil
	}
	var exact, contains []Step
	for _, st := range steps {
		n, id := FoldName(st.Name), FoldName(st.ID)
		switch {
		case n == q || id == q:
			exact = append(exact, st)
		case strings.Contains(n, q) || strings.Contains(q, n) || strings.Contains(id, q):
			contains = append(contains, st)
		}
	}
	if len(exact) > 0 {
		return exact
	}
	return contains
}

// NearestSteps returns up to n step names closest to query by edit distance
// over the normalized names, for "did you mean" hints.
func NearestSteps(steps []Step, query string, n int) []string {
	q := FoldName(query)
	type scored struct {
		name string
		d    int
	}
	var all []scored
	for _, st := range steps {
		d := min(levenshtein(q, FoldName(st.Name)), levenshtein(q, FoldName(st.ID)))
		// Shared words pull a name closer: "fuel surcharge" is nearer to
		// "Rate check" than its letters alone say only when words overlap.
		for _, w := range strings.Fields(strings.ToLower(query)) {
			if len(w) > 3 && strings.Contains(strings.ToLower(st.Name), w) {
				d -= len(w)
			}
		}
		all = append(all, scored{st.Name, d})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].d < all[j].d })
	var out []string
	for _, s := range all {
		if len(out) == n {
			break
		}
		out = append(out, s.name)
	}
	return out
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

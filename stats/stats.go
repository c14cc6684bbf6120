// Package stats holds the arithmetic the ladder's figures are made of: counts
// of agreements, Wilson score intervals, rolling windows over weekly counts
// and the non-inferiority test of outcome failure rates (DESIGN.md §4).
//
// It is pure: no clock, no I/O, no state, so every figure in an evidence
// pack can be recomputed from its inputs. Besides the standard library it
// imports only the root package, whose plain value types (ladder.Window,
// ladder.OutcomeGroup, ladder.NIState) are what it computes.
package stats

import (
	"math"

	"github.com/ladderhq/ladder"
)

// Z95 is the standard normal quantile of a two-sided 95% interval, the z
// every Wilson bound in an evidence pack uses.
const Z95 = 1.96

// Counts is a number of reviews and how many of them agreed with the person.
type Counts struct {
	N          int `json:"n"`
	Agreements int `json:"agreements"`
}

// Accuracy returns agreements / n, and false when n is 0 because an accuracy
// of no reviews is undefined, not zero (the evidence pack shows null).
func (c Counts) Accuracy() (float64, bool) {
	if c.N <= 0 {
		return 0, false
	}
	return float64(c.Agreements) / float64(c.N), true
}

// Add returns the sum of c and o.
func (c Counts) Add(o Counts) Counts {
	return Counts{N: c.N + o.N, Agreements: c.Agreements + o.Agreements}
}

// Sum pools weeks into one Counts. Pooling sums the trials; it does not
// average the weekly accuracies, so a busy week weighs more than a quiet one.
func Sum(weeks []Counts) Counts {
	var s Counts
	for _, w := range weeks {
		s = s.Add(w)
	}
	return s
}

// Wilson returns the Wilson score interval of agreements successes in n
// trials at the normal quantile z:
//
//	(p̂ + z²/2n ± z·sqrt(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n)
//
// Wilson rather than the normal (Wald) interval because it stays inside
// [0, 1] and keeps its coverage near p̂ = 0 or 1, which is exactly where a
// good agent's accuracy lives. With n == 0 nothing is known and the interval
// is (0, 1). Agreements outside [0, n] are clamped into it; the bounds are
// clamped to [0, 1] against rounding.
func Wilson(agreements, n int, z float64) (lower, upper float64) {
	if n <= 0 {
		return 0, 1
	}
	agreements = min(max(agreements, 0), n)
	nf := float64(n)
	p := float64(agreements) / nf
	z2 := z * z
	center := p + z2/(2*nf)
	half := z * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	denom := 1 + z2/nf
	return clamp01((center - half) / denom), clamp01((center + half) / denom)
}

func clamp01(x float64) float64 { return min(max(x, 0), 1) }

// NewWindow returns the window of weeks from..to whose pooled counts are c,
// with its Wilson interval at z.
func NewWindow(from, to int, c Counts, z float64) ladder.Window {
	w := ladder.Window{From: from, To: to, N: c.N, Agreements: c.Agreements}
	if acc, ok := c.Accuracy(); ok {
		w.Accuracy = &acc
	}
	w.WilsonLower, w.WilsonUpper = Wilson(c.Agreements, c.N, z)
	return w
}

// Pool pools every week of weeks into one window; first is the week number
// of weeks[0]. An empty slice gives the empty window (From = To = 0).
func Pool(weeks []Counts, first int, z float64) ladder.Window {
	if len(weeks) == 0 {
		return NewWindow(0, 0, Counts{}, z)
	}
	return NewWindow(first, first+len(weeks)-1, Sum(weeks), z)
}

// Rolling pools the last k weeks of weeks, where weeks[i] is week i+1 and
// the slice is dense: a week without reviews must be present as a zero
// Counts, otherwise "the last k weeks" would silently reach further back in
// time. With fewer than k weeks it pools them all; k <= 0 gives the empty
// window.
func Rolling(weeks []Counts, k int, z float64) ladder.Window {
	if k <= 0 {
		return Pool(nil, 0, z)
	}
	start := max(len(weeks)-k, 0)
	return Pool(weeks[start:], start+1, z)
}

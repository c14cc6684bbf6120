package stats

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ladderhq/ladder"
)

// approx compares floats to within 1e-12: the reference values were
// computed in another language, so the last bits may differ.
var approx = cmpopts.EquateApprox(0, 1e-12)

func ptr(f float64) *float64 { return &f }

func checkInterval(t *testing.T, name string, gotLo, gotHi, wantLo, wantHi, tol float64) {
	t.Helper()
	if math.Abs(gotLo-wantLo) > tol || math.Abs(gotHi-wantHi) > tol {
		t.Errorf("%s: got (%.17g, %.17g), want (%.17g, %.17g) within %g", name, gotLo, gotHi, wantLo, wantHi, tol)
	}
}

// TestWilsonNewcombe checks Wilson against the published values of the score
// method without continuity correction in Newcombe, "Two-sided confidence
// intervals for the single proportion: comparison of seven methods",
// Statistics in Medicine 17 (1998), Table I, method 3. They are printed to
// four decimals, hence the tolerance.
func TestWilsonNewcombe(t *testing.T) {
	tests := []struct {
		x, n           int
		wantLo, wantHi float64
	}{
		{81, 263, 0.2553, 0.3662},
		{15, 148, 0.0624, 0.1605},
		{0, 20, 0, 0.1611},
		{1, 29, 0.0061, 0.1718},
	}
	for _, tt := range tests {
		lo, hi := Wilson(tt.x, tt.n, Z95)
		checkInterval(t, "Newcombe", lo, hi, tt.wantLo, tt.wantHi, 0.00005)
	}
}

// TestWilson checks Wilson to full precision against the closed form of
// DESIGN.md §4 evaluated independently in Python 3 with the math module
// (statsmodels is not installed here), with the bounds clamped to [0, 1]:
//
//	p=x/n; c=p+z*z/(2*n); h=z*math.sqrt(p*(1-p)/n+z*z/(4*n*n)); d=1+z*z/n
//	((c-h)/d, (c+h)/d)
//
// The same script reproduces the Newcombe values above.
func TestWilson(t *testing.T) {
	tests := []struct {
		name           string
		x, n           int
		wantLo, wantHi float64
	}{
		{"Newcombe 81/263", 81, 263, 0.25528761306366959, 0.36621068405342155},
		{"Newcombe 15/148", 15, 148, 0.062385845140334642, 0.16048851867037339},
		{"Newcombe 0/20", 0, 20, 0, 0.16113012549493319},
		{"Newcombe 1/29", 1, 29, 0.0061130566140322638, 0.17175891064700252},
		{"all agree", 20, 20, 0.83886987450506667, 1},
		{"one trial, disagree", 0, 1, 0, 0.79345670852610706},
		{"one trial, agree", 1, 1, 0.20654329147389294, 1},
		{"half", 1, 2, 0.094528654800866113, 0.90547134519913397},
		{"class A propose edge 149/150", 149, 150, 0.9632062470660242, 0.99882222897686646},
		{"143/150", 143, 150, 0.9068124260764262, 0.9772137410981222},
		{"95/100", 95, 100, 0.8882480347279117, 0.97845663854368647},
		{"190/200", 190, 200, 0.9104209437021562, 0.972617650971355},
		{"295/300", 295, 300, 0.96158405637829425, 0.99286062795722785},
		{"300/300", 300, 300, 0.98735657000226418, 1},
		{"no trials", 0, 0, 0, 1},
		{"negative n is no trials", 3, -1, 0, 1},
		{"agreements above n clamp to n", 25, 20, 0.83886987450506667, 1},
		{"negative agreements clamp to 0", -4, 20, 0, 0.16113012549493319},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := Wilson(tt.x, tt.n, Z95)
			checkInterval(t, tt.name, lo, hi, tt.wantLo, tt.wantHi, 1e-12)
			if lo < 0 || hi > 1 || lo > hi {
				t.Errorf("interval (%v, %v) not ordered inside [0, 1]", lo, hi)
			}
		})
	}
}

func TestCountsAccuracy(t *testing.T) {
	tests := []struct {
		c      Counts
		want   float64
		wantOK bool
	}{
		{Counts{}, 0, false},
		{Counts{N: 4, Agreements: 3}, 0.75, true},
		{Counts{N: 10, Agreements: 10}, 1, true},
		{Counts{N: 10}, 0, true},
	}
	for _, tt := range tests {
		got, ok := tt.c.Accuracy()
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%+v.Accuracy() = %v, %v; want %v, %v", tt.c, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestRolling checks the windows by hand: the pooled counts are sums, and
// the bounds come from Wilson (whose values are checked above).
func TestRolling(t *testing.T) {
	weeks := []Counts{{N: 10, Agreements: 9}, {N: 0}, {N: 100, Agreements: 95}, {N: 50, Agreements: 50}, {N: 40, Agreements: 38}}
	window := func(from, to, n, agree int) ladder.Window {
		t.Helper()
		lo, hi := Wilson(agree, n, Z95)
		w := ladder.Window{From: from, To: to, N: n, Agreements: agree, WilsonLower: lo, WilsonUpper: hi}
		if n > 0 {
			w.Accuracy = ptr(float64(agree) / float64(n))
		}
		return w
	}
	tests := []struct {
		name  string
		weeks []Counts
		k     int
		want  ladder.Window
	}{
		{"rolling 2", weeks, 2, window(4, 5, 90, 88)},
		{"rolling 4 spans an empty week", weeks, 4, window(2, 5, 190, 183)},
		{"k equals length", weeks, 5, window(1, 5, 200, 192)},
		{"fewer weeks than k pools them all", weeks[:2], 4, window(1, 2, 10, 9)},
		{"last week empty: accuracy null, interval (0, 1)", weeks[:2], 1, ladder.Window{From: 2, To: 2, WilsonLower: 0, WilsonUpper: 1}},
		{"no weeks", nil, 4, ladder.Window{WilsonUpper: 1}},
		{"k zero", weeks, 0, ladder.Window{WilsonUpper: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Rolling(tt.weeks, tt.k, Z95)
			if diff := cmp.Diff(tt.want, got, approx); diff != "" {
				t.Errorf("Rolling(k=%d) mismatch (-want +got):\n%s", tt.k, diff)
			}
		})
	}
}

func TestPoolNumbersFromFirst(t *testing.T) {
	got := Pool([]Counts{{N: 2, Agreements: 1}, {N: 2, Agreements: 2}}, 7, Z95)
	lo, hi := Wilson(3, 4, Z95)
	want := ladder.Window{From: 7, To: 8, N: 4, Agreements: 3, Accuracy: ptr(0.75), WilsonLower: lo, WilsonUpper: hi}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Pool mismatch (-want +got):\n%s", diff)
	}
}

package stats

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
)

// TestNormal checks Φ and Φ⁻¹ against Python 3's statistics.NormalDist
// (an implementation independent of math.Erfc and math.Erfinv).
func TestNormal(t *testing.T) {
	for _, tt := range []struct {
		name      string
		got, want float64
	}{
		{"Φ(1.96)", NormalCDF(1.96), 0.9750021048517796},
		{"Φ(-3)", NormalCDF(-3), 0.0013498980316301035},
		{"Φ(0)", NormalCDF(0), 0.5},
		{"Φ⁻¹(0.95)", NormalQuantile(0.95), 1.6448536269514715},
	} {
		if math.Abs(tt.got-tt.want) > 1e-12 {
			t.Errorf("%s = %.17g, want %.17g", tt.name, tt.got, tt.want)
		}
	}
}

// TestNonInferiority checks the test against the same formulas evaluated
// independently in Python 3 with math and statistics.NormalDist (scipy and
// statsmodels are not installed here):
//
//	pa=fa/na; pp=fp/np; d=pa-pp; se=math.sqrt(pa*(1-pa)/na+pp*(1-pp)/np)
//	zq=NormalDist().inv_cdf(0.95); p=NormalDist().cdf((d-0.02)/se)
//	(d, d-zq*se, d+zq*se, p)
//
// The states follow from those numbers by the rules in the doc comment.
func TestNonInferiority(t *testing.T) {
	type want struct {
		state              ladder.NIState
		diff, lo, hi, pval float64
	}
	tests := []struct {
		name   string
		na, fa int
		np, fp int
		want   want
	}{
		{"no agent outcomes", 0, 0, 100, 3, want{ladder.NINotStarted, 0, -1, 1, 1}},
		{"no person outcomes", 100, 3, 0, 0, want{ladder.NINotStarted, 0, -1, 1, 1}},
		{"agent better, large n: pass", 1000, 20, 1000, 25, want{ladder.NIPass, -0.005000000000000001, -0.015907624553212568, 0.0059076245532125662, 8.1635884792929936e-05}},
		{"agent lower, pass", 400, 8, 400, 12, want{ladder.NIPass, -0.0099999999999999985, -0.028149377827796637, 0.0081493778277966396, 0.0032753710813990811}},
		{"equal rates, too little data", 200, 10, 200, 10, want{ladder.NIInconclusive, 0, -0.035848753683989071, 0.035848753683989071, 0.17939767894347081}},
		{"agent clearly worse: fail", 100, 20, 100, 5, want{ladder.NIFail, 0.15000000000000002, 0.075073351421220125, 0.22492664857877992, 0.99784049510910577}},
		{"worse by exactly the margin", 1000, 40, 1000, 20, want{ladder.NIInconclusive, 0.02, 0.0074731679847802775, 0.03252683201521972, 0.5}},
		{"at min n, lower bound below margin", 30, 3, 30, 0, want{ladder.NIInconclusive, 0.10000000000000001, 0.0099076564724491639, 0.19009234352755083, 0.92793648259199235}},
		{"at min n, fail", 30, 15, 30, 0, want{ladder.NIFail, 0.5, 0.34984609412074863, 0.65015390587925137, 0.9999999272387754}},
		{"one short of min n, p < alpha still inconclusive", 29, 0, 29, 5, want{ladder.NIInconclusive, -0.17241379310344829, -0.287791228955253, -0.057036357251643563, 0.0030430526790233281}},
		{"zero standard error, below margin", 30, 0, 30, 0, want{ladder.NIPass, 0, 0, 0, 0}},
		{"zero standard error, above margin", 30, 30, 30, 0, want{ladder.NIFail, 1, 1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NonInferiority(tt.na, tt.fa, tt.np, tt.fp, DefaultMargin, DefaultAlpha)
			got := want{r.State, r.Diff, r.DiffLower, r.DiffUpper, r.PValue}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{}), approx); diff != "" {
				t.Errorf("NonInferiority mismatch (-want +got):\n%s", diff)
			}
			wantGroups := [2]ladder.OutcomeGroup{{N: tt.na, Failures: tt.fa}, {N: tt.np, Failures: tt.fp}}
			if diff := cmp.Diff(wantGroups, [2]ladder.OutcomeGroup{r.Agent, r.Person}); diff != "" {
				t.Errorf("groups mismatch (-want +got):\n%s", diff)
			}
			if r.Margin != DefaultMargin || r.Alpha != DefaultAlpha {
				t.Errorf("margin, alpha = %v, %v; want %v, %v", r.Margin, r.Alpha, DefaultMargin, DefaultAlpha)
			}
		})
	}
}

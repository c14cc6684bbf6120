package stats

import (
	"math"

	"github.com/ladderhq/ladder"
)

// NIMinN is the number of outcomes each group needs before the test may
// PASS or FAIL. Below it the normal approximation the test rests on is poor
// (and one failure moves the rate by several points), so the state stays
// INCONCLUSIVE whatever the p-value says.
const NIMinN = 30

// DefaultMargin is the non-inferiority margin of DESIGN.md §4: two
// percentage points of outcome failure rate.
const DefaultMargin = 0.02

// DefaultAlpha is the one-sided significance level of the outcome test.
const DefaultAlpha = 0.05

// NIResult is the outcome of NonInferiority. Diff is p_agent − p_person;
// DiffLower and DiffUpper are its one-sided (1 − Alpha) confidence bounds
// (each alone, not together a two-sided interval), clamped to [−1, 1].
// When the state is NOT_STARTED nothing is known: Diff is 0, the bounds are
// −1 and 1 and PValue is 1.
type NIResult struct {
	State     ladder.NIState      `json:"state"`
	Agent     ladder.OutcomeGroup `json:"agent"`
	Person    ladder.OutcomeGroup `json:"person"`
	Margin    float64             `json:"margin"`
	Alpha     float64             `json:"alpha"`
	Diff      float64             `json:"diff"`
	DiffLower float64             `json:"diff_lower"`
	DiffUpper float64             `json:"diff_upper"`
	PValue    float64             `json:"p_value"`
}

// NonInferiority tests whether the agent's outcome failure rate is no worse
// than the person's by more than margin (absolute, e.g. 0.02 for two points).
//
// The method is the one-sided Wald z-test for a difference of two
// independent proportions with the unpooled standard error:
//
//	d  = p_agent − p_person
//	se = sqrt(p_agent(1−p_agent)/n_agent + p_person(1−p_person)/n_person)
//	H0: d ≥ margin   H1: d < margin
//	z  = (d − margin) / se,   p = Φ(z)
//
// with Φ computed from math.Erfc. The bounds are d ± z₁₋α·se. The state is
//
//   - NOT_STARTED when either group has no outcomes;
//   - INCONCLUSIVE when either group has fewer than NIMinN outcomes;
//   - PASS when p < alpha (equivalently DiffUpper < margin): non-inferior;
//   - FAIL when DiffLower > margin: the agent is clearly worse;
//   - INCONCLUSIVE otherwise.
//
// The standard error is unpooled because H0 is not p_agent = p_person, so
// there is no common rate to pool under it. When se is 0 (both rates 0 or
// 1) the test degenerates to comparing d with margin exactly: p is 0 when
// d < margin and 1 otherwise. Failures outside [0, n] are clamped into it.
func NonInferiority(agentN, agentFailures, personN, personFailures int, margin, alpha float64) NIResult {
	agentN, personN = max(agentN, 0), max(personN, 0)
	r := NIResult{
		Agent:  ladder.OutcomeGroup{N: agentN, Failures: min(max(agentFailures, 0), agentN)},
		Person: ladder.OutcomeGroup{N: personN, Failures: min(max(personFailures, 0), personN)},
		Margin: margin,
		Alpha:  alpha,
	}
	pa, okA := r.Agent.Rate()
	pp, okP := r.Person.Rate()
	if !okA || !okP {
		r.State, r.DiffLower, r.DiffUpper, r.PValue = ladder.NINotStarted, -1, 1, 1
		return r
	}
	r.Diff = pa - pp
	se := math.Sqrt(pa*(1-pa)/float64(agentN) + pp*(1-pp)/float64(personN))
	zq := NormalQuantile(1 - alpha)
	r.DiffLower = min(max(r.Diff-zq*se, -1), 1)
	r.DiffUpper = min(max(r.Diff+zq*se, -1), 1)
	switch {
	case se > 0:
		r.PValue = NormalCDF((r.Diff - margin) / se)
	case r.Diff < margin:
		r.PValue = 0
	default:
		r.PValue = 1
	}
	switch {
	case agentN < NIMinN || personN < NIMinN:
		r.State = ladder.NIInconclusive
	case r.PValue < alpha:
		r.State = ladder.NIPass
	case r.DiffLower > margin:
		r.State = ladder.NIFail
	default:
		r.State = ladder.NIInconclusive
	}
	return r
}

// NormalCDF returns Φ(x), the standard normal distribution function. It uses
// Erfc rather than 1 + Erf so that the far lower tail keeps its precision.
func NormalCDF(x float64) float64 {
	return 0.5 * math.Erfc(-x/math.Sqrt2)
}

// NormalQuantile returns Φ⁻¹(p), the standard normal quantile, for p in
// (0, 1); it returns −Inf at 0, +Inf at 1 and NaN outside [0, 1].
func NormalQuantile(p float64) float64 {
	return math.Sqrt2 * math.Erfinv(2*p-1)
}

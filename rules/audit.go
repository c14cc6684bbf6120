package rules

import (
	"math"

	"github.com/ladderhq/ladder"
)

// AuditCleanWeeks is how many weeks without an audit failure halve the
// audit rate.
const AuditCleanWeeks = 8

// MinAuditRate returns the floor of a step's audit rate: 0.05 for class A,
// 0.02 for class B. An unknown class gets class A's, the stricter.
func MinAuditRate(class ladder.RiskClass) float64 {
	if class == ladder.ClassB {
		return 0.02
	}
	return 0.05
}

// InitialAuditRate returns the audit rate a step starts auto with:
//
//	ceil(ln 0.05 / ln τ_auto) / (4 × weekly volume)
//
// clamped to [MinAuditRate(class), 1]. The numerator is the number of
// consecutive clean audits that rule out, at 95%, an accuracy below τ_auto
// (τᵏ < 0.05); spreading them over four weeks of volume means a drop below
// τ_auto is caught within about a month. tauAuto is the step's AutoLower.
// A weekly volume of 0 or less, or a τ_auto outside (0, 1), gives 1: with
// nothing to size the sample by, audit everything.
func InitialAuditRate(class ladder.RiskClass, tauAuto, weeklyVolume float64) float64 {
	if !(weeklyVolume > 0) || !(tauAuto > 0 && tauAuto < 1) {
		return 1
	}
	k := math.Ceil(math.Log(0.05) / math.Log(tauAuto))
	return clampAuditRate(k/(4*weeklyVolume), class)
}

// AdjustAuditRate returns the audit rate after a week (or an audit): doubled
// after any audit failure, halved once cleanWeeks reaches AuditCleanWeeks,
// clamped to [MinAuditRate(class), 1]. A failure wins over clean weeks.
// cleanWeeks counts whole weeks since the last audit failure or the last
// change of rate, whichever is later; the caller resets it after a change,
// so the rate halves once per eight clean weeks, not every week after.
func AdjustAuditRate(rate float64, class ladder.RiskClass, auditFailed bool, cleanWeeks int) float64 {
	switch {
	case auditFailed:
		rate *= 2
	case cleanWeeks >= AuditCleanWeeks:
		rate /= 2
	}
	return clampAuditRate(rate, class)
}

func clampAuditRate(rate float64, class ladder.RiskClass) float64 {
	if math.IsNaN(rate) {
		return 1
	}
	return min(max(rate, MinAuditRate(class)), 1)
}

// Package rules decides when a step moves between lanes: the default rules
// of DESIGN.md §4 for risk classes A and B, their per-step overrides, and the
// audit sampling rate of steps in auto.
//
// It is pure: Evaluate reads an Input (the figures and the clock reading the
// caller gathered) and returns what should happen and why, with every number
// it used, so the caller can record the lane change and an evidence pack can
// show how far a step is from its next move. Nothing here reads a store or a
// clock, and nothing here changes a lane; the caller does, under its own
// transaction.
package rules

import (
	"github.com/ladderhq/ladder"
)

// Defaults returns the default thresholds of DESIGN.md §4 for class. Any
// class other than B gets class A's: an unknown class is treated as the
// money-moving one, so a typo makes a step harder to promote, not easier.
func Defaults(class ladder.RiskClass) ladder.Thresholds {
	if class == ladder.ClassB {
		return ladder.Thresholds{
			ProposeMinWeeks: 2, ProposeMinN: 100, ProposeLower: 0.90,
			AutoMinWeeks: 4, AutoMinN: 200, AutoLower: 0.95,
			Sev1CleanWeeks: 2,
		}
	}
	return ladder.Thresholds{
		ProposeMinWeeks: 2, ProposeMinN: 150, ProposeLower: 0.95,
		AutoMinWeeks: 4, AutoMinN: 300, AutoLower: 0.98,
		Sev1CleanWeeks: 2,
	}
}

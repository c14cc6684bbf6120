package rules

import (
	"math"
	"testing"

	"github.com/ladderhq/ladder"
)

// TestInitialAuditRate checks the formula of DESIGN.md §4. The numerators
// were computed in Python 3: math.ceil(math.log(0.05)/math.log(0.98)) = 149
// and math.ceil(math.log(0.05)/math.log(0.95)) = 59.
func TestInitialAuditRate(t *testing.T) {
	tests := []struct {
		name   string
		class  ladder.RiskClass
		tau    float64
		volume float64
		want   float64
	}{
		{"A, 100 a week", ladder.ClassA, 0.98, 100, 149.0 / 400},
		{"B, 100 a week", ladder.ClassB, 0.95, 100, 59.0 / 400},
		{"A, busy step clamps to the class-A floor", ladder.ClassA, 0.98, 10000, 0.05},
		{"B, busy step clamps to the class-B floor", ladder.ClassB, 0.95, 10000, 0.02},
		{"B, just above the floor", ladder.ClassB, 0.95, 737, 59.0 / 2948},
		{"quiet step clamps to 1", ladder.ClassA, 0.98, 10, 1},
		{"no volume audits everything", ladder.ClassB, 0.95, 0, 1},
		{"tau of 1 audits everything", ladder.ClassA, 1, 100, 1},
		{"tau of 0 audits everything", ladder.ClassA, 0, 100, 1},
		{"unknown class gets the class-A floor", "", 0.98, 10000, 0.05},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := InitialAuditRate(tt.class, tt.tau, tt.volume)
			if math.Abs(got-tt.want) > 1e-15 {
				t.Errorf("InitialAuditRate(%q, %v, %v) = %v, want %v", tt.class, tt.tau, tt.volume, got, tt.want)
			}
		})
	}
}

func TestAdjustAuditRate(t *testing.T) {
	tests := []struct {
		name       string
		rate       float64
		class      ladder.RiskClass
		failed     bool
		cleanWeeks int
		want       float64
	}{
		{"failure doubles", 0.1, ladder.ClassA, true, 0, 0.2},
		{"failure wins over clean weeks", 0.1, ladder.ClassA, true, 8, 0.2},
		{"doubling clamps to 1", 0.6, ladder.ClassB, true, 0, 1},
		{"7 clean weeks keep the rate", 0.1, ladder.ClassA, false, 7, 0.1},
		{"8 clean weeks halve", 0.1, ladder.ClassA, false, 8, 0.05},
		{"more than 8 clean weeks halve once", 0.4, ladder.ClassB, false, 12, 0.2},
		{"halving clamps to the class-A floor", 0.06, ladder.ClassA, false, 8, 0.05},
		{"halving clamps to the class-B floor", 0.03, ladder.ClassB, false, 8, 0.02},
		{"class B may go below class A's floor", 0.08, ladder.ClassB, false, 8, 0.04},
		{"a rate below the floor is raised", 0.001, ladder.ClassA, false, 0, 0.05},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AdjustAuditRate(tt.rate, tt.class, tt.failed, tt.cleanWeeks)
			if math.Abs(got-tt.want) > 1e-15 {
				t.Errorf("AdjustAuditRate(%v, %q, %v, %d) = %v, want %v", tt.rate, tt.class, tt.failed, tt.cleanWeeks, got, tt.want)
			}
		})
	}
}

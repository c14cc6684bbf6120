package rules

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ladderhq/ladder"
)

func TestDefaults(t *testing.T) {
	tests := []struct {
		class ladder.RiskClass
		want  ladder.Thresholds
	}{
		{ladder.ClassA, ladder.Thresholds{ProposeMinWeeks: 2, ProposeMinN: 150, ProposeLower: 0.95, AutoMinWeeks: 4, AutoMinN: 300, AutoLower: 0.98, Sev1CleanWeeks: 2}},
		{ladder.ClassB, ladder.Thresholds{ProposeMinWeeks: 2, ProposeMinN: 100, ProposeLower: 0.90, AutoMinWeeks: 4, AutoMinN: 200, AutoLower: 0.95, Sev1CleanWeeks: 2}},
		{"", Defaults(ladder.ClassA)},
		{"C", Defaults(ladder.ClassA)},
	}
	for _, tt := range tests {
		got := Defaults(tt.class)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Defaults(%q) mismatch (-want +got):\n%s", tt.class, diff)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("Defaults(%q).Validate() = %v", tt.class, err)
		}
	}
}

func TestWith(t *testing.T) {
	i := func(v int) *int { return &v }
	f := func(v float64) *float64 { return &v }
	a := Defaults(ladder.ClassA)
	tests := []struct {
		name string
		o    *ladder.ThresholdOverrides
		want ladder.Thresholds
	}{
		{"nil keeps defaults", nil, a},
		{"empty keeps defaults", &ladder.ThresholdOverrides{}, a},
		{"one field", &ladder.ThresholdOverrides{AutoLower: f(0.99)}, ladder.Thresholds{ProposeMinWeeks: 2, ProposeMinN: 150, ProposeLower: 0.95, AutoMinWeeks: 4, AutoMinN: 300, AutoLower: 0.99, Sev1CleanWeeks: 2}},
		{"every field", &ladder.ThresholdOverrides{
			ProposeMinWeeks: i(1), ProposeMinN: i(50), ProposeLower: f(0.8),
			AutoMinWeeks: i(3), AutoMinN: i(80), AutoLower: f(0.85), Sev1CleanWeeks: i(0),
		}, ladder.Thresholds{ProposeMinWeeks: 1, ProposeMinN: 50, ProposeLower: 0.8, AutoMinWeeks: 3, AutoMinN: 80, AutoLower: 0.85, Sev1CleanWeeks: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, a.With(tt.o)); diff != "" {
				t.Errorf("With mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	a := Defaults(ladder.ClassA)
	tests := []struct {
		name  string
		t     ladder.Thresholds
		wants []string // substrings of the error; none means valid
	}{
		{"defaults", a, nil},
		{"negative n", func() ladder.Thresholds { x := a; x.AutoMinN = -1; return x }(), []string{"auto_min_n"}},
		{"bound of 1", func() ladder.Thresholds { x := a; x.AutoLower = 1; return x }(), []string{"auto_lower: 1 is not between 0 and 1"}},
		{"auto below propose", func() ladder.Thresholds { x := a; x.AutoLower = 0.9; return x }(), []string{"auto_lower: 0.9 is below propose_lower 0.95"}},
		{"several at once", func() ladder.Thresholds { x := a; x.ProposeMinWeeks = -2; x.ProposeLower = 0; return x }(), []string{"propose_min_weeks", "propose_lower"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.t.Validate()
			if len(tt.wants) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error naming %q", tt.wants)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// approx compares floats to within 1e-12, for figures recomputed in tests.
var approx = cmpopts.EquateApprox(0, 1e-12)

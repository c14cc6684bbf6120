package ladder

import (
	"errors"
	"fmt"
)

// Requirement is one condition of a promotion: what the step has, what the
// rule needs and whether it is met. Have and Need are float64 for figures,
// a string for the outcome test ("not FAIL"), or nil when the figure does
// not exist yet (no reviews, no operator data, no severity-1 error).
type Requirement struct {
	Have any  `json:"have"`
	Need any  `json:"need"`
	Met  bool `json:"met"`
}

// Thresholds are the numbers the lane rules compare the figures with.
// Promotions compare the Wilson lower bound with ProposeLower and AutoLower;
// demotions compare the upper bound with the same numbers, which is the
// hysteresis of DESIGN.md §4.
type Thresholds struct {
	// ProposeMinWeeks is how many whole weeks a step must spend in shadow
	// before it may move to propose.
	ProposeMinWeeks int `json:"propose_min_weeks"`
	// ProposeMinN is the number of reviews the rolling 4-week window of the
	// current epoch must hold for shadow → propose.
	ProposeMinN int `json:"propose_min_n"`
	// ProposeLower is the accuracy a step must show to propose: the rolling
	// 4-week Wilson lower bound must reach it to promote, and the rolling
	// 2-week upper bound falling below it demotes propose → shadow.
	ProposeLower float64 `json:"propose_lower"`
	// AutoMinWeeks is how many whole weeks a step must spend in propose
	// before it may move to auto.
	AutoMinWeeks int `json:"auto_min_weeks"`
	// AutoMinN is the number of reviews the rolling 4-week window of the
	// current epoch must hold for propose → auto.
	AutoMinN int `json:"auto_min_n"`
	// AutoLower is the accuracy a step must show to act alone (τ_auto):
	// promote on the lower bound, demote on the upper bound.
	AutoLower float64 `json:"auto_lower"`
	// Sev1CleanWeeks is how many weeks must pass after a severity-1 error
	// before propose → auto.
	Sev1CleanWeeks int `json:"sev1_clean_weeks"`
}

// ThresholdOverrides are per-step changes to the thresholds, as a step's
// configuration spells them. A nil field keeps the default. The YAML and
// JSON names are part of the configuration format.
type ThresholdOverrides struct {
	ProposeMinWeeks *int     `yaml:"propose_min_weeks,omitempty" json:"propose_min_weeks,omitempty"`
	ProposeMinN     *int     `yaml:"propose_min_n,omitempty" json:"propose_min_n,omitempty"`
	ProposeLower    *float64 `yaml:"propose_lower,omitempty" json:"propose_lower,omitempty"`
	AutoMinWeeks    *int     `yaml:"auto_min_weeks,omitempty" json:"auto_min_weeks,omitempty"`
	AutoMinN        *int     `yaml:"auto_min_n,omitempty" json:"auto_min_n,omitempty"`
	AutoLower       *float64 `yaml:"auto_lower,omitempty" json:"auto_lower,omitempty"`
	Sev1CleanWeeks  *int     `yaml:"sev1_clean_weeks,omitempty" json:"sev1_clean_weeks,omitempty"`
}

// With returns t with every non-nil field of o in place of its own. A nil o
// returns t unchanged. With does not validate; call Validate on the result.
func (t Thresholds) With(o *ThresholdOverrides) Thresholds {
	if o == nil {
		return t
	}
	setInt := func(dst *int, src *int) {
		if src != nil {
			*dst = *src
		}
	}
	setFloat := func(dst *float64, src *float64) {
		if src != nil {
			*dst = *src
		}
	}
	setInt(&t.ProposeMinWeeks, o.ProposeMinWeeks)
	setInt(&t.ProposeMinN, o.ProposeMinN)
	setFloat(&t.ProposeLower, o.ProposeLower)
	setInt(&t.AutoMinWeeks, o.AutoMinWeeks)
	setInt(&t.AutoMinN, o.AutoMinN)
	setFloat(&t.AutoLower, o.AutoLower)
	setInt(&t.Sev1CleanWeeks, o.Sev1CleanWeeks)
	return t
}

// Validate reports every threshold that makes no sense, naming it as the
// configuration does: counts must not be negative, the bounds must lie in
// (0, 1), and auto must not ask for less accuracy than propose (otherwise a
// step could be demoted out of propose while it still qualifies for auto).
func (t Thresholds) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{
		{"propose_min_weeks", t.ProposeMinWeeks},
		{"propose_min_n", t.ProposeMinN},
		{"auto_min_weeks", t.AutoMinWeeks},
		{"auto_min_n", t.AutoMinN},
		{"sev1_clean_weeks", t.Sev1CleanWeeks},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %d is negative", f.name, f.v))
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"propose_lower", t.ProposeLower},
		{"auto_lower", t.AutoLower},
	} {
		if !(f.v > 0 && f.v < 1) {
			errs = append(errs, fmt.Errorf("%s: %v is not between 0 and 1", f.name, f.v))
		}
	}
	if t.AutoLower < t.ProposeLower {
		errs = append(errs, fmt.Errorf("auto_lower: %v is below propose_lower %v", t.AutoLower, t.ProposeLower))
	}
	return errors.Join(errs...)
}

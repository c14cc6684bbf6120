package ladder

// Figures are a step's weekly and pooled figures.
type Figures struct {
	Weekly        []WeekRow     `json:"weekly"`
	Rolling2      Window        `json:"rolling_2"`
	Rolling4      Window        `json:"rolling_4"`
	OperatorError OperatorError `json:"operator_error"`
}

// WeekRow is one week of an evidence pack's weekly figures.
type WeekRow struct {
	Week        int      `json:"week"`
	ISOWeek     string   `json:"iso_week"`
	N           int      `json:"n"`
	Agreements  int      `json:"agreements"`
	Accuracy    *float64 `json:"accuracy"`
	WilsonLower float64  `json:"wilson_lower"`
	WilsonUpper float64  `json:"wilson_upper"`
}

// OperatorError is the share of double-reviewed human-handled items where
// the second reviewer found the first wrong.
type OperatorError struct {
	N      int      `json:"n"`
	Errors int      `json:"errors"`
	Rate   *float64 `json:"rate"`
}

// Window is the pooled figures of a run of weeks: one week, or the rolling 2-
// and 4-week windows of an evidence pack. From and To are week numbers
// (week 1 is the step's first week of records), both inclusive; they are 0
// when the window holds no weeks. Accuracy is nil when N is 0. The JSON names
// are those of the evidence pack contract.
type Window struct {
	From        int      `json:"from"`
	To          int      `json:"to"`
	N           int      `json:"n"`
	Agreements  int      `json:"agreements"`
	Accuracy    *float64 `json:"accuracy"`
	WilsonLower float64  `json:"wilson_lower"`
	WilsonUpper float64  `json:"wilson_upper"`
}

// OutcomeGroup is the outcomes of one handler: how many items, how many failed.
type OutcomeGroup struct {
	N        int `json:"n"`
	Failures int `json:"failures"`
}

// Rate returns failures / n, and false when n is 0.
func (g OutcomeGroup) Rate() (float64, bool) {
	if g.N <= 0 {
		return 0, false
	}
	return float64(g.Failures) / float64(g.N), true
}

// NIState is the state of a non-inferiority test, as the evidence pack's
// outcome_test.state shows it.
type NIState string

// The states of the outcome test.
const (
	// NINotStarted: one of the two groups has no outcomes yet.
	NINotStarted NIState = "NOT_STARTED"
	// NIInconclusive: too few outcomes, or the data cannot tell yet.
	NIInconclusive NIState = "INCONCLUSIVE"
	// NIPass: the agent's failure rate is shown to be no worse than the
	// person's by more than the margin.
	NIPass NIState = "PASS"
	// NIFail: the agent's failure rate is shown to be worse than the
	// person's by more than the margin.
	NIFail NIState = "FAIL"
)

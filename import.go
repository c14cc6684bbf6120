package ladder

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AuditHistoryImport is the audit kind of one import of past records as a
// whole (its file's sha256 and its counts per step); each imported review
// carries its own review record as well.
const AuditHistoryImport = "history.import"

// The formats an import file may have.
const (
	ImportFormatJSONL = "jsonl"
	ImportFormatCSV   = "csv"
)

// The row types of an import file.
const (
	ImportReview  = "review"
	ImportAudit   = "audit"
	ImportOutcome = "outcome"
)

// MaxImportErrors caps the bad rows one refusal lists: enough to fix a
// file in a few rounds, not a copy of a file that is wrong throughout.
const MaxImportErrors = 20

// ImportRow is one past record of an import file. The JSON names are the
// file contract: a JSON lines file holds one object per line with these
// fields, and a CSV file has a header row of the same names.
type ImportRow struct {
	// Type is review (an item a person handled in shadow or approved in
	// propose), audit (a check of an item the agent handled alone, in
	// auto) or outcome (an item's downstream result).
	Type string `json:"type"`
	// At is when it happened, RFC 3339.
	At string `json:"at"`
	// Queue may be left out when the step id or name is unique.
	Queue string `json:"queue,omitempty"`
	Step  string `json:"step"`
	Item  string `json:"item"`
	// Lane is, for a review, the lane the item was routed in: shadow or
	// propose. An audit is of an item routed in auto.
	Lane     string `json:"lane,omitempty"`
	Verdict  string `json:"verdict,omitempty"`
	Severity int    `json:"severity,omitempty"`
	// OperatorError, when set, says the item was double-reviewed and
	// whether the second reviewer found the first one wrong.
	OperatorError *bool  `json:"operator_error,omitempty"`
	Adjudication  bool   `json:"adjudication,omitempty"`
	Reviewer      string `json:"reviewer,omitempty"`
	Note          string `json:"note,omitempty"`
	// HandledBy (agent or person) and OK are an outcome's.
	HandledBy string `json:"handled_by,omitempty"`
	OK        *bool  `json:"ok,omitempty"`

	// Line is the row's line in its file (1 for the first line).
	Line int `json:"-"`
	// Time is At parsed, set by ParseImport.
	Time time.Time `json:"-"`
}

// ImportRowError is one bad row of an import file.
type ImportRowError struct {
	Line    int    `json:"line"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// importColumns are the CSV header's allowed names, as ImportRow's JSON.
var importColumns = []string{"type", "at", "queue", "step", "item", "lane", "verdict", "severity",
	"operator_error", "adjudication", "reviewer", "note", "handled_by", "ok"}

// ImportFormatOf returns the format a file name implies: csv for .csv,
// else jsonl.
func ImportFormatOf(name string) string {
	if strings.HasSuffix(strings.ToLower(name), ".csv") {
		return ImportFormatCSV
	}
	return ImportFormatJSONL
}

// ParseImport reads an import file strictly: unknown fields or columns,
// malformed values and missing required fields are refused, each with its
// line and field. It returns every row when all are good, else the bad
// rows (up to MaxImportErrors), so nothing of a bad file is imported.
func ParseImport(data []byte, format string) ([]ImportRow, []ImportRowError, error) {
	var (
		rows []ImportRow
		bad  []ImportRowError
	)
	// Spreadsheets often start a UTF-8 file with a byte-order mark.
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	switch format {
	case ImportFormatJSONL:
		rows, bad = parseJSONL(data)
	case ImportFormatCSV:
		rows, bad = parseCSV(data)
	default:
		return nil, nil, InvalidField("format", fmt.Sprintf("The import format %q is not allowed; allowed values: jsonl, csv.", format), "send JSON lines (jsonl) or CSV with a header row (csv)")
	}
	for i := range rows {
		bad = append(bad, rows[i].check()...)
	}
	if len(bad) == 0 && len(rows) == 0 {
		bad = append(bad, ImportRowError{Line: 1, Message: "The file holds no rows."})
	}
	return rows, CapImportErrors(bad), nil
}

// CapImportErrors orders bad rows by line and keeps the first
// MaxImportErrors.
func CapImportErrors(bad []ImportRowError) []ImportRowError {
	// Stable: a line's errors keep their order. Not by insertion: a file
	// of 100,000 bad lines makes two long lists to merge.
	slices.SortStableFunc(bad, func(a, b ImportRowError) int { return cmp.Compare(a.Line, b.Line) })
	if len(bad) > MaxImportErrors {
		bad = bad[:MaxImportErrors]
	}
	return bad
}

func parseJSONL(data []byte) ([]ImportRow, []ImportRowError) {
	var (
		rows []ImportRow
		bad  []ImportRowError
	)
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue // a blank line, or the final newline
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var r ImportRow
		if err := dec.Decode(&r); err != nil {
			bad = append(bad, ImportRowError{Line: i + 1, Field: jsonField(err), Message: "The line is not a valid import row: " + err.Error() + "."})
			continue
		}
		if dec.More() {
			bad = append(bad, ImportRowError{Line: i + 1, Message: "The line holds more than one JSON value."})
			continue
		}
		r.Line = i + 1
		rows = append(rows, r)
	}
	return rows, bad
}

// jsonField names the field a decoding error is about, when it says.
func jsonField(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field
	}
	if s := err.Error(); strings.HasPrefix(s, "json: unknown field ") {
		return strings.Trim(strings.TrimPrefix(s, "json: unknown field "), `"`)
	}
	return ""
}

func parseCSV(data []byte) ([]ImportRow, []ImportRowError) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1 // a short or long row is reported by line below
	header, err := r.Read()
	if err != nil {
		return nil, []ImportRowError{{Line: 1, Message: "The file has no CSV header row."}}
	}
	known := map[string]bool{}
	for _, c := range importColumns {
		known[c] = true
	}
	var bad []ImportRowError
	seen := map[string]bool{}
	for _, h := range header {
		h = strings.TrimSpace(h)
		if !known[h] {
			bad = append(bad, ImportRowError{Line: 1, Field: h, Message: fmt.Sprintf("The column %q is not an import field; allowed: %s.", h, strings.Join(importColumns, ", "))})
		}
		if seen[h] {
			bad = append(bad, ImportRowError{Line: 1, Field: h, Message: fmt.Sprintf("The column %q appears twice.", h)})
		}
		seen[h] = true
	}
	if len(bad) > 0 {
		return nil, bad
	}
	var rows []ImportRow
	for {
		line, _ := r.FieldPos(0)
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				line = pe.Line
			}
			bad = append(bad, ImportRowError{Line: line, Message: "The line is not valid CSV: " + err.Error() + "."})
			if pe == nil {
				break
			}
			continue
		}
		line, _ = r.FieldPos(0)
		if len(rec) != len(header) {
			bad = append(bad, ImportRowError{Line: line, Message: fmt.Sprintf("The row has %d fields; the header has %d.", len(rec), len(header))})
			continue
		}
		row, errs := csvRow(header, rec, line)
		if len(errs) > 0 {
			bad = append(bad, errs...)
			continue
		}
		rows = append(rows, row)
	}
	return rows, bad
}

// csvRow fills a row from one CSV record; an empty cell is a field left out.
func csvRow(header, rec []string, line int) (ImportRow, []ImportRowError) {
	row := ImportRow{Line: line}
	var bad []ImportRowError
	boolOf := func(name, v string) bool {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad = append(bad, ImportRowError{Line: line, Field: name, Message: fmt.Sprintf("The %s value %q is not true or false.", name, v)})
		}
		return b
	}
	for i, h := range header {
		v := strings.TrimSpace(rec[i])
		if v == "" {
			continue
		}
		switch strings.TrimSpace(h) {
		case "type":
			row.Type = v
		case "at":
			row.At = v
		case "queue":
			row.Queue = v
		case "step":
			row.Step = v
		case "item":
			row.Item = v
		case "lane":
			row.Lane = v
		case "verdict":
			row.Verdict = v
		case "severity":
			n, err := strconv.Atoi(v)
			if err != nil {
				bad = append(bad, ImportRowError{Line: line, Field: "severity", Message: fmt.Sprintf("The severity %q is not a whole number.", v)})
			}
			row.Severity = n
		case "operator_error":
			b := boolOf("operator_error", v)
			row.OperatorError = &b
		case "adjudication":
			row.Adjudication = boolOf("adjudication", v)
		case "reviewer":
			row.Reviewer = v
		case "note":
			row.Note = rec[i]
		case "handled_by":
			row.HandledBy = v
		case "ok":
			ok := boolOf("ok", v)
			row.OK = &ok
		}
	}
	return row, bad
}

// check validates what a row says on its own (the step is the service's
// to resolve) and parses its time.
func (r *ImportRow) check() []ImportRowError {
	var bad []ImportRowError
	add := func(field, msg string) { bad = append(bad, ImportRowError{Line: r.Line, Field: field, Message: msg}) }
	t, err := time.Parse(time.RFC3339Nano, r.At)
	switch {
	case r.At == "":
		add("at", "The at field is required (RFC 3339, e.g. 2026-08-03T10:00:00Z).")
	case err != nil:
		add("at", fmt.Sprintf("The time %q is not RFC 3339 (e.g. 2026-08-03T10:00:00Z).", r.At))
	default:
		r.Time = NormTime(t)
	}
	if strings.TrimSpace(r.Step) == "" {
		add("step", "The step field is required.")
	}
	if strings.TrimSpace(r.Item) == "" {
		add("item", "The item field is required.")
	} else if len(r.Item) > 512 {
		add("item", "The item is longer than 512 characters.")
	}
	switch r.Type {
	case ImportReview, ImportAudit:
		bad = append(bad, r.checkReview()...)
	case ImportOutcome:
		if r.HandledBy != HandledByAgent && r.HandledBy != HandledByPerson {
			add("handled_by", fmt.Sprintf("The handled_by value %q is not allowed; allowed values: agent, person.", r.HandledBy))
		}
		if r.OK == nil {
			add("ok", "The ok field is required for an outcome.")
		}
		if r.Lane != "" || r.Verdict != "" || r.Severity != 0 || r.OperatorError != nil || r.Adjudication || r.Reviewer != "" || r.Note != "" {
			add("type", "An outcome takes handled_by and ok, not the fields of a review.")
		}
	default:
		add("type", fmt.Sprintf("The type %q is not allowed; allowed values: review, audit, outcome.", r.Type))
	}
	return bad
}

func (r *ImportRow) checkReview() []ImportRowError {
	var bad []ImportRowError
	add := func(field, msg string) { bad = append(bad, ImportRowError{Line: r.Line, Field: field, Message: msg}) }
	switch {
	case r.Type == ImportReview && r.Lane != string(LaneShadow) && r.Lane != string(LanePropose):
		add("lane", fmt.Sprintf("The lane %q is not allowed for a review; allowed values: shadow, propose (an item routed in auto is an audit).", r.Lane))
	case r.Type == ImportAudit && r.Lane != "" && r.Lane != string(LaneAuto):
		add("lane", fmt.Sprintf("The lane %q is not allowed for an audit; an audit is of an item routed in auto.", r.Lane))
	}
	v := Verdict(r.Verdict)
	if v != VerdictAgree && v != VerdictDisagree {
		add("verdict", fmt.Sprintf("The verdict %q is not allowed; allowed values: agree, disagree.", r.Verdict))
	}
	if r.Severity != 0 && (r.Severity < 1 || r.Severity > 3) {
		add("severity", fmt.Sprintf("The severity %d is out of range; allowed values: 1, 2, 3.", r.Severity))
	}
	if v == VerdictAgree && r.Severity != 0 {
		add("severity", "A severity applies to disagreements only.")
	}
	if r.HandledBy != "" || r.OK != nil {
		add("type", "A review or audit takes a verdict, not handled_by or ok.")
	}
	return bad
}

// RouteLane is the lane a review or audit row's item was routed in.
func (r ImportRow) RouteLane() Lane {
	if r.Type == ImportAudit {
		return LaneAuto
	}
	return Lane(r.Lane)
}

// ImportTx is what an import needs of a store's write transaction: the
// review routine's (RecordReviewTx) and the routes and outcomes a history
// brings with it.
type ImportTx interface {
	ReviewTx
	// InsertRoute stores a route; one for the same step, item and lane
	// epoch exists already is an error wrapping ErrConflict.
	InsertRoute(r Route) error
	// InsertOutcome stores an outcome and counts it.
	InsertOutcome(o Outcome) error
	// ReviewedRoute returns the id of the latest route of the item at the
	// step that has a review, if any: what an adjudication overrules.
	ReviewedRoute(k StepKey, item string) (string, bool, error)
	// StepRecord returns what the step's record holds, read inside the
	// transaction (after LockState), so no live review can land between
	// the import's checks and its writes.
	StepRecord(k StepKey) (StepRecord, error)
}

// StepRecord is what an import builds on: the time of the step's latest
// recorded review or lane change (Has false when there is neither) and its
// outcome counts.
type StepRecord struct {
	Latest   time.Time
	Has      bool
	Outcomes OutcomeCounts
}

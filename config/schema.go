package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/ladderhq/ladder/gate"
)

// SchemaFile is the name of the committed JSON Schema of the config file.
const SchemaFile = "ladder.schema.json"

// Schema returns the JSON Schema (draft 2020-12) of the config file,
// generated from the same Go types Parse decodes into, so the schema cannot
// drift from the parser. `go generate ./config` writes it to
// config/ladder.schema.json for editors (yaml-language-server:
// `# yaml-language-server: $schema=ladder.schema.json`); a test keeps the
// committed file current.
//
// The schema checks shape only (fields, types, enums). What needs the whole
// file — unique ids, references between fields, CEL that compiles — only
// Parse checks.
func Schema() ([]byte, error) {
	caseSchema, err := jsonschema.For[gate.Case](nil)
	if err != nil {
		return nil, fmt.Errorf("gate case schema: %w", err)
	}
	// gate.Case carries no jsonschema tags (the gate package does not know
	// about files), so its fields are described here.
	for path, doc := range gateDocs {
		if err := annotate(caseSchema, path, func(s *jsonschema.Schema) { s.Description = doc }); err != nil {
			return nil, err
		}
	}
	s, err := jsonschema.ForType(typeOfFileConfig, &jsonschema.ForOptions{
		TypeSchemas: map[reflect.Type]*jsonschema.Schema{reflect.TypeFor[gate.Case](): caseSchema},
	})
	if err != nil {
		return nil, fmt.Errorf("config schema: %w", err)
	}
	for path, doc := range rulesDocs {
		if err := annotate(s, "workspaces.queues.steps.rules."+path, func(s *jsonschema.Schema) { s.Description = doc }); err != nil {
			return nil, err
		}
	}
	for path, values := range enums {
		if err := annotate(s, path, func(s *jsonschema.Schema) { s.Enum = values }); err != nil {
			return nil, err
		}
	}
	for _, path := range durations {
		if err := annotate(s, path, func(s *jsonschema.Schema) { s.Pattern = durationPattern }); err != nil {
			return nil, err
		}
	}
	s.Schema = "https://json-schema.org/draft/2020-12/schema"
	s.Title = "ladder configuration"
	s.Description = "The workspaces (queues, steps, capabilities, gate cases, scopes) and server settings of a ladder server. Generated from package config by go generate; do not edit."
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("encode schema: %w", err)
	}
	return buf.Bytes(), nil
}

// durationPattern matches what time.ParseDuration accepts, near enough for
// an editor to flag "10 seconds".
const durationPattern = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`

var enums = map[string][]any{
	"workspaces.queues.steps.lane":          {"human_only", "shadow", "propose", "auto"},
	"workspaces.queues.steps.class":         {"A", "B"},
	"workspaces.capabilities.executor.kind": {"http", "mcp", "record"},
}

var durations = []string{
	"server.approval_ttl",
	"server.webhook_retention",
	"workspaces.webhooks.backoff",
	"workspaces.webhooks.timeout",
	"workspaces.capabilities.executor.timeout",
}

var rulesDocs = map[string]string{
	"propose_min_weeks": "Whole weeks in shadow before shadow → propose. Default 2.",
	"propose_min_n":     "Reviews the rolling 4-week window must hold for shadow → propose. Default 150 (A) / 100 (B).",
	"propose_lower":     "Wilson lower bound needed for shadow → propose; the rolling 2-week upper bound below it demotes. Default 0.95 (A) / 0.90 (B).",
	"auto_min_weeks":    "Whole weeks in propose before propose → auto. Default 4.",
	"auto_min_n":        "Reviews the rolling 4-week window must hold for propose → auto. Default 300 (A) / 200 (B).",
	"auto_lower":        "Wilson lower bound needed for propose → auto (τ_auto); the upper bound below it demotes. Default 0.98 (A) / 0.95 (B).",
	"sev1_clean_weeks":  "Weeks without a severity-1 error before propose → auto. Default 2.",
}

var gateDocs = map[string]string{
	"id":                                     "Case id, used in authorize calls (ai_investment).",
	"name":                                   "Plain title of the case.",
	"description":                            "What the case governs.",
	"weights":                                "Weights of R, C, O, Ro in Q; non-negative, summing to 1. Default 0.25 each.",
	"tau_pass":                               "Q at or above which evidence passes. Default 0.85.",
	"tau_repair":                             "Q at or above which auto-repair is tried. Default 0.50.",
	"k_dry":                                  "Repair rounds in a row that may bring nothing new before the gate escalates. Default 3.",
	"commits":                                "The irreversible actions the case governs.",
	"commits.id":                             "Commit id (the action_id of gate history).",
	"commits.name":                           "Plain name of the commit.",
	"commits.soft_commit":                    "The commit may contain a promise; it passes only without one or with feasibility evidence.",
	"commits.bypass_to_human":                "A person always makes this commit; it has no precondition function and authorize refuses it.",
	"commits.precondition_fn":                "The precondition function; required unless bypass_to_human.",
	"commits.precondition_fn.name":           "Function name, the precondition_fn of authorize calls.",
	"commits.precondition_fn.doc":            "What the function checks and what evidence to send.",
	"commits.precondition_fn.evidence":       "JSON Schema (type object) of the evidence; every property needs a type and a description.",
	"commits.precondition_fn.R":              "CEL over evidence yielding relevance in [0,1].",
	"commits.precondition_fn.C":              "CEL over evidence yielding coverage in [0,1].",
	"commits.precondition_fn.O":              "CEL over evidence yielding ordering in [0,1].",
	"commits.precondition_fn.Ro":             "CEL over evidence yielding robustness in [0,1].",
	"commits.precondition_fn.verifiable_ext": "CEL yielding a bool: can the gap be closed by outside verification? Default true.",
	"commits.precondition_fn.notes":          "CEL yielding a string shown with the decision.",
	"commits.precondition_fn.repair":         "Evidence field to the CEL expression giving its repaired value.",
	"commits.precondition_fn.min":            "Per-dimension floors keyed R, C, O, Ro, e.g. {R: 0.7}.",
	"commits.precondition_fn.promise":        "CEL yielding a bool for soft commits: does the evidence contain a promise?",
	"commits.precondition_fn.feasibility":    "CEL yielding a bool for soft commits: is the promise backed by feasibility evidence?",
}

// annotate applies fn to the schema at a dotted property path, stepping
// through array items and nullable wrappers on the way.
func annotate(s *jsonschema.Schema, path string, fn func(*jsonschema.Schema)) error {
	cur := s
	for _, name := range strings.Split(path, ".") {
		if cur.Items != nil {
			cur = cur.Items
		}
		next := cur.Properties[name]
		if next == nil {
			return fmt.Errorf("schema: no property %q on the way to %s", name, path)
		}
		cur = next
	}
	fn(cur)
	return nil
}

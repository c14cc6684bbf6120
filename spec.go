package ladder

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Workspace is a tenant as declared in the config: its queues and steps, its
// capabilities, and the scope values that belong to it.
type Workspace struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// Scopes maps a scope field (e.g. "program") to the values that belong to
	// this workspace (e.g. "partner-2027"). A capability call whose scope
	// value is not listed is refused with WORKSPACE_REFUSED.
	Scopes       map[string][]string `json:"scopes,omitempty"`
	Queues       []Queue             `json:"queues"`
	Capabilities []Capability        `json:"capabilities,omitempty"`
}

// Queue holds the steps of one kind of work.
type Queue struct {
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	Steps []Step `json:"steps"`
}

// Step is one step of a queue as declared in the config.
type Step struct {
	ID          string    `json:"step"`
	Name        string    `json:"name"`
	Queue       string    `json:"queue"`
	MoneyMoving bool      `json:"money_moving"`
	Class       RiskClass `json:"class"`
	// StartLane is the lane the step starts in on an empty database.
	StartLane Lane `json:"start_lane"`
	// AuditRate, when set, is the starting audit rate; otherwise it is
	// computed from the auto threshold and WeeklyVolume.
	AuditRate    float64 `json:"audit_rate,omitempty"`
	WeeklyVolume int     `json:"weekly_volume,omitempty"`
}

// Capability is an action an agent may call, id "domain:action".
type Capability struct {
	ID          string         `json:"id"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Payload     map[string]any `json:"payload_schema,omitempty"` // a JSON Schema object
	ScopeFields []string       `json:"scope_fields,omitempty"`
	HumanGate   bool           `json:"human_gate"`
	// ReadOnly says the upstream only reads; MCP annotations follow it.
	ReadOnly bool `json:"read_only,omitempty"`
	Served   bool `json:"served"`
	// Step, when set, ties the capability to a step ("queue/step" or a step
	// id): the ladder decides whether the agent may act alone.
	Step string `json:"step,omitempty"`
	// Item names the payload field that identifies the work item of a
	// step-tied call: a property name (bill_id) or a JSON pointer
	// (/bill/id). The call's route, and so its audit sample, is for that
	// item, never for a value the agent picks apart from the action (such
	// as its idempotency key).
	Item string `json:"item,omitempty"`
	// MaxPayloadBytes and MaxEvidenceBytes cap a call's payload and
	// evidence (canonical JSON): what is stored per call, per approval and
	// per shadow proposal stays bounded.
	MaxPayloadBytes  int `json:"max_payload_bytes"`
	MaxEvidenceBytes int `json:"max_evidence_bytes"`
	// Gate, when set, ties the capability to a gate precondition: the
	// evidence decides.
	Gate     *CapabilityGate `json:"gate,omitempty"`
	Executor Executor        `json:"executor"`
}

// CapabilityGate names the gate case and precondition function a call's
// evidence must pass.
type CapabilityGate struct {
	Case string `json:"case"`
	Fn   string `json:"precondition_fn"`
	// Bind ties the evidence to the action it authorizes: each evidence
	// field (key) must equal the payload field (value, a property name or
	// a JSON pointer) of the same call, so evidence gathered for one bill
	// never authorizes another.
	Bind map[string]string `json:"bind,omitempty"`
}

// Executor kinds.
const (
	ExecHTTP   = "http"
	ExecMCP    = "mcp"
	ExecRecord = "record"
)

// Executor says how a capability call is carried out.
type Executor struct {
	Kind    string        `json:"kind"` // http, mcp or record
	URL     string        `json:"url,omitempty"`
	Tool    string        `json:"tool,omitempty"` // for mcp: the upstream tool name
	Timeout time.Duration `json:"timeout,omitempty"`
	// Headers are sent upstream as they are; HeadersFromEnv maps a header to
	// the environment variable holding its value (credentials stay out of
	// the config file). The caller's key is never forwarded.
	Headers        map[string]string `json:"headers,omitempty"`
	HeadersFromEnv map[string]string `json:"headers_from_env,omitempty"`
}

// ItemPath splits a capability's item field into the property names it
// walks: "bill_id" is one name; a JSON pointer ("/bill/id", RFC 6901, with
// ~1 for '/' and ~0 for '~') is one name per segment.
func ItemPath(item string) ([]string, error) {
	if item == "" {
		return nil, errors.New("the item field is empty")
	}
	if !strings.HasPrefix(item, "/") {
		return []string{item}, nil
	}
	segs := strings.Split(item[1:], "/")
	for i, seg := range segs {
		if seg == "" {
			return nil, fmt.Errorf("JSON pointer %q has an empty segment", item)
		}
		segs[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
	}
	return segs, nil
}

// ItemOf reads the work item a payload names at path (see ItemPath): a
// non-empty string, or a number in its JSON spelling. ok is false when the
// payload has no such value.
func ItemOf(payload map[string]any, path []string) (item string, ok bool) {
	v, ok := ValueAt(payload, path)
	if !ok {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, strings.TrimSpace(x) != ""
	case json.Number:
		return x.String(), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	}
	return "", false
}

// ValueAt returns the value a payload holds at path (see ItemPath).
func ValueAt(payload map[string]any, path []string) (any, bool) {
	var v any = payload
	for _, seg := range path {
		m, isMap := v.(map[string]any)
		if !isMap {
			return nil, false
		}
		var ok bool
		if v, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return v, true
}

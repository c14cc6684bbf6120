// Package config reads the one YAML file that declares a ladder server's
// workspaces — queues and steps, capabilities, gate cases, scopes — and its
// server settings, and turns it into the domain types.
//
// Reading is strict, because a config mistake here decides what an agent may
// do alone with money: unknown fields, duplicate keys and keys that differ
// from a field only in case are errors, and so is every reference that does
// not resolve (a capability's step, its gate case, its scope fields). Every
// fault names the file, the line and the field and says what is expected:
//
//	ladder.yaml:12: workspaces[0].queues[0].steps[2].lane: "autp" is not a lane; expected one of human_only, shadow, propose, auto
//
// and all faults are reported at once (see Error and Errors).
//
// The shape, in brief (demo.yaml is a full example):
//
//	server:                      # optional; every field has a default
//	  approval_ttl: 72h
//	  audit_secret_env: LADDER_AUDIT_SECRET
//	  checkpoint_key_env: LADDER_CHECKPOINT_KEY
//	  rate_limit: {per_second: 20, burst: 40}
//	workspaces:
//	  - id: vantrow-bills
//	    scopes: {program: [partner-2027]}
//	    queues:
//	      - id: bills
//	        name: Freight bills
//	        steps:
//	          - {id: post_tms, name: Post to the TMS, money_moving: true, lane: auto, audit_rate: 0.1, weekly_volume: 200}
//	    gate_cases: [ … ]        # gate.Case, see package gate
//	    capabilities:
//	      - id: tms:postBill
//	        title: Post a bill to the TMS
//	        description: …
//	        payload_schema: {type: object, properties: {bill_id: {type: string, description: …}}}
//	        step: bills/post_tms
//	        gate: {case: release_payment, precondition_fn: score_release_hold}
//	        executor: {kind: http, url: "https://tms.example/bills", timeout: 5s, headers_from_env: {Authorization: TMS_TOKEN}}
//
// The file's JSON Schema, ladder.schema.json, is generated from the same Go
// types by `go generate` (see Schema) so editors can check and complete it.
// Demo returns the configuration `ladder demo` runs.
package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/gate"
	"github.com/ladderhq/ladder/rules"
	"go.yaml.in/yaml/v3"
)

//go:generate go run ./internal/schemagen ladder.schema.json

// Defaults of the server settings and executors.
const (
	DefaultListen         = "127.0.0.1:8080"
	DefaultApprovalTTL    = 72 * time.Hour
	DefaultAuditSecretEnv = "LADDER_AUDIT_SECRET"
	// DefaultCheckpointKeyEnv is server.checkpoint_key_env's default.
	DefaultCheckpointKeyEnv = "LADDER_CHECKPOINT_KEY"
	DefaultRatePerSecond    = 20.0
	DefaultRateBurst        = 40
	DefaultTimeout          = 10 * time.Second
	// DefaultMaxShadowProposals is server.max_shadow_proposals's default.
	DefaultMaxShadowProposals = 1000
	// DefaultWebhookRetention is server.webhook_retention's default.
	DefaultWebhookRetention = 7 * 24 * time.Hour
)

// DemoScheme is the URL scheme of executors served by the in-process demo
// upstream: "demo:ledger" names the demo tool server "ledger". `ladder demo`
// replaces such URLs with the address of the upstream it starts; `ladder
// serve` should refuse to start with them, since nothing would answer.
const DemoScheme = "demo"

// maxFileSize bounds what Load reads; a config file is a few hundred lines.
const maxFileSize = 8 << 20

//go:embed demo.yaml
var demoYAML []byte

// Demo returns the embedded demo configuration (config/demo.yaml): the
// workspaces of seed 000 (vantrow-bills, checkcall-loads, iia-gate) with their
// live step names, and partner-programs with capabilities modelled on seed
// 004. The caller owns the returned slice.
func Demo() []byte { return bytes.Clone(demoYAML) }

// Config is a checked configuration.
type Config struct {
	// File is the name the configuration was read under.
	File string
	// Server holds the server settings, defaults applied.
	Server Server
	// Workspaces are the tenants, in file order.
	Workspaces []Workspace
	// Identity holds the trusted OAuth issuers and their mapping rules;
	// nil when the file has no identity section (keys only).
	Identity *ladder.Identity

	pos map[string]int // field path → line
}

// Server holds the settings of the server process.
type Server struct {
	// Listen is the host:port to listen on.
	Listen string
	// PublicURL is the base URL of evidence links; it has no trailing slash.
	PublicURL string
	// ApprovalTTL is how long a pending approval waits before it expires
	// and the agent sees "expired".
	ApprovalTTL time.Duration
	// WebhookRetention is how long delivered event deliveries (and events
	// left with no delivery) are kept before the dispatcher deletes them.
	// Dead and pending deliveries are kept.
	WebhookRetention time.Duration
	// AuditSecretEnv names the environment variable holding the secret of
	// blind audit sampling; see AuditSecret.
	AuditSecretEnv string
	// CheckpointKeyEnv names the environment variable holding the private
	// key that signs the audit logs' checkpoints (docs/audit-log.md).
	CheckpointKeyEnv string
	// RatePerSecond and RateBurst are the per-key token bucket.
	RatePerSecond float64
	RateBurst     int
	// AllowedOrigins are the browser origins /mcp accepts.
	AllowedOrigins []string
	// MaxShadowProposals caps the shadow proposals one key may have stored
	// for one step while their routes are unreviewed.
	MaxShadowProposals int

	derivedSecret []byte
}

// AuditSecret returns the secret of deterministic blind audit sampling,
// sampled = H(secret, workspace, step, item) < audit_rate (DESIGN §4).
//
// It reads the environment variable AuditSecretEnv through getenv (injected,
// so tests and replicas decide where it comes from). When that is unset it
// returns a secret derived from the config file's bytes, and derived is true:
// replicas that share the file still agree on which items are sampled, but
// anyone who can read the file can predict the sample, so production servers
// should set the variable (serve logs a warning when derived is true).
func (s *Server) AuditSecret(getenv func(string) string) (secret []byte, derived bool) {
	if v := getenv(s.AuditSecretEnv); v != "" {
		return []byte(v), false
	}
	return bytes.Clone(s.derivedSecret), true
}

// Workspace is one tenant as declared: the domain workspace plus what only
// the config knows (step rules, gate cases).
type Workspace struct {
	ID   string
	Name string
	// Scopes maps a scope field to the values that belong to this workspace.
	Scopes       map[string][]string
	Queues       []Queue
	Capabilities []ladder.Capability
	// GateCases are the evidence gate cases, as declared; Gate returns them
	// compiled.
	GateCases []gate.Case
	// Webhooks are the endpoints the workspace's events go to.
	Webhooks []Webhook
	// Slack, when set, posts the workspace's events to Slack.
	Slack *Slack

	gate *gate.Gate
	path string // field path of the workspace, for Position
}

// Queue is one queue of a workspace.
type Queue struct {
	ID    string
	Name  string
	Steps []Step
}

// Step is a domain step (Queue filled, defaults applied) with its
// description and per-step rule overrides.
type Step struct {
	ladder.Step
	// Description says what the step covers.
	Description string
	// Rules are the step's changes to the class default thresholds; apply
	// them with rules.Defaults(s.Class).With(&s.Rules).
	Rules ladder.ThresholdOverrides
}

// Load reads and checks the config file at path. Errors name path.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("read config %s: larger than %d bytes", path, maxFileSize)
	}
	return Parse(path, data)
}

// Parse checks the YAML in data and returns the configuration. name is used
// in error messages (usually the file's path). The error, if any, joins one
// *Error per fault; see Errors.
func Parse(name string, data []byte) (*Config, error) {
	errs := &errorList{}
	root, ok := parseYAML(name, data, errs)
	if !ok {
		return nil, errs.err()
	}
	w := &walker{file: name, pos: map[string]int{}, block: map[string]bool{}, errs: errs}
	w.walk(root, typeOfFileConfig, "")
	if errs.len() > 0 {
		// The shape is wrong; checking meaning now would mostly repeat the
		// same faults in other words.
		return nil, errs.err()
	}
	var fc fileConfig
	if err := root.Decode(&fc); err != nil {
		addYAMLError(name, err, errs)
		return nil, errs.err()
	}
	b := &builder{file: name, pos: w.pos, block: w.block, errs: errs}
	cfg := b.build(&fc, data)
	if errs.len() > 0 {
		return nil, errs.err()
	}
	return cfg, nil
}

// parseYAML parses exactly one YAML document into a node tree.
func parseYAML(name string, data []byte, errs *errorList) (*yaml.Node, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			errs.add(name, 0, "", "the file is empty; expected a mapping with workspaces")
			return nil, false
		}
		addYAMLError(name, err, errs)
		return nil, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		errs.add(name, extra.Line, "", "the file holds more than one YAML document (---); put everything in one")
		return nil, false
	} else if !errors.Is(err, io.EOF) {
		addYAMLError(name, err, errs)
		return nil, false
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		errs.add(name, 0, "", "the file is empty; expected a mapping with workspaces")
		return nil, false
	}
	return doc.Content[0], true
}

// addYAMLError turns yaml.v3's "yaml: line N: msg" errors into *Error.
func addYAMLError(name string, err error, errs *errorList) {
	var msgs []string
	if te, ok := err.(*yaml.TypeError); ok {
		msgs = te.Errors
	} else {
		msgs = []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	for _, m := range msgs {
		line := 0
		if rest, ok := strings.CutPrefix(m, "line "); ok {
			if num, after, ok := strings.Cut(rest, ": "); ok {
				if _, err := fmt.Sscanf(num, "%d", &line); err == nil {
					m = after
				}
			}
		}
		errs.add(name, line, "", m)
	}
}

// Workspace returns the workspace with the given id.
func (c *Config) Workspace(id string) (*Workspace, bool) {
	for i := range c.Workspaces {
		if c.Workspaces[i].ID == id {
			return &c.Workspaces[i], true
		}
	}
	return nil, false
}

// Position is a place in the config file.
type Position struct {
	File string
	Line int // 0 when unknown
}

// String formats the position as file:line.
func (p Position) String() string {
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d", p.File, p.Line)
}

// Position returns where a field path (as Error.Field spells it, e.g.
// "workspaces[0].queues[0].steps[2].lane") is declared. A path the file does
// not spell out — a field left to its default — gets the place of its
// nearest declared parent, so a later complaint about it (a rule override
// that turns out not to fit, say) still points somewhere useful.
func (c *Config) Position(path string) Position {
	return Position{File: c.File, Line: lineOf(c.pos, path)}
}

// StepPosition returns where a step of workspace ws is declared.
func (c *Config) StepPosition(ws, step string) Position {
	w, ok := c.Workspace(ws)
	if !ok {
		return Position{File: c.File}
	}
	for qi, q := range w.Queues {
		for si, s := range q.Steps {
			if s.ID == step {
				return c.Position(fmt.Sprintf("%s.queues[%d].steps[%d]", w.path, qi, si))
			}
		}
	}
	return c.Position(w.path)
}

// lineOf finds the line of path or of its nearest recorded ancestor.
func lineOf(pos map[string]int, path string) int {
	for path != "" {
		if l, ok := pos[path]; ok {
			return l
		}
		path = parent(path)
	}
	return 0
}

// parent drops the last element of a field path: a.b[2] → a.b, a.b → a,
// a["x.y"] → a.
func parent(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndex(path, "["); i >= 0 {
			// An index or a quoted key; a quoted key may hold '[', so find
			// the bracket that starts it.
			if j := strings.LastIndex(path, `["`); j >= 0 && strings.HasSuffix(path, `"]`) {
				return path[:j]
			}
			return path[:i]
		}
	}
	if i := strings.LastIndex(path, "."); i >= 0 {
		return path[:i]
	}
	return ""
}

// Steps returns the workspace's steps across its queues, in file order.
func (w *Workspace) Steps() []ladder.Step {
	var out []ladder.Step
	for _, q := range w.Queues {
		for _, s := range q.Steps {
			out = append(out, s.Step)
		}
	}
	return out
}

// FindStep returns the step with id step in queue. An empty queue searches
// every queue (step ids are unique in a workspace), and step may then also
// be written "queue/step", the form a capability's step takes.
func (w *Workspace) FindStep(queue, step string) (Step, bool) {
	if queue == "" {
		if q, s, ok := strings.Cut(step, "/"); ok {
			queue, step = q, s
		}
	}
	for _, q := range w.Queues {
		if queue != "" && q.ID != queue {
			continue
		}
		for _, s := range q.Steps {
			if s.ID == step {
				return s, true
			}
		}
	}
	return Step{}, false
}

// Capability returns the capability with the given id, served or not.
func (w *Workspace) Capability(id string) (ladder.Capability, bool) {
	for _, c := range w.Capabilities {
		if c.ID == id {
			return c, true
		}
	}
	return ladder.Capability{}, false
}

// Gate returns the workspace's gate cases, compiled. For a Config from Parse
// or Load it is never nil: a workspace without cases gets an empty gate,
// which refuses every case.
func (w *Workspace) Gate() *gate.Gate { return w.gate }

// Domain returns the workspace as the domain package declares it.
func (w *Workspace) Domain() ladder.Workspace {
	d := ladder.Workspace{
		ID:           w.ID,
		Name:         w.Name,
		Scopes:       w.Scopes,
		Queues:       make([]ladder.Queue, 0, len(w.Queues)),
		Capabilities: w.Capabilities,
	}
	for _, q := range w.Queues {
		dq := ladder.Queue{ID: q.ID, Name: q.Name, Steps: make([]ladder.Step, 0, len(q.Steps))}
		for _, s := range q.Steps {
			dq.Steps = append(dq.Steps, s.Step)
		}
		d.Queues = append(d.Queues, dq)
	}
	return d
}

// Parts are what the service is built from: the domain workspaces, each
// step's lane rules (class defaults with the step's overrides) and each
// workspace's compiled gate.
type Parts struct {
	Workspaces []ladder.Workspace
	Rules      map[ladder.StepKey]ladder.Thresholds
	Gates      map[string]*gate.Gate
}

// Parts returns the configuration as the service takes it.
func (c *Config) Parts() Parts {
	p := Parts{Rules: map[ladder.StepKey]ladder.Thresholds{}, Gates: map[string]*gate.Gate{}}
	for i := range c.Workspaces {
		w := &c.Workspaces[i]
		p.Workspaces = append(p.Workspaces, w.Domain())
		p.Gates[w.ID] = w.Gate()
		for _, q := range w.Queues {
			for _, s := range q.Steps {
				p.Rules[ladder.StepKey{Workspace: w.ID, Queue: q.ID, Step: s.ID}] = rules.Defaults(s.Class).With(&s.Rules)
			}
		}
	}
	return p
}

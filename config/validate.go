package config

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/gate"
	"github.com/ladderhq/ladder/rules"
)

var typeOfFileConfig = reflect.TypeFor[fileConfig]()

var (
	// Ids appear in URLs (/v1/steps/{queue}/{step}/evidence) and log lines,
	// so they are kept to characters that need no escaping anywhere.
	idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	// Capability ids are domain:action (seed 004).
	capPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}:[A-Za-z][A-Za-z0-9_-]{0,63}$`)
	envPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// An HTTP header name is an RFC 9110 token.
	headerPattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// builtinTools are the MCP tools every workspace has (DESIGN §3.1). A
// capability's portable tool name (':' → '_') must not take one of them.
var builtinTools = []string{
	"which_steps_run_alone", "step_evidence", "route_item",
	"list_precondition_functions", "authorize", "gate_history_get", "approval_status",
}

// builder checks the decoded file and builds the Config, reporting every
// fault with the line of the field it is about.
type builder struct {
	file  string
	pos   map[string]int
	block map[string]bool
	errs  *errorList
}

func (b *builder) fail(path, format string, args ...any) {
	b.errs.add(b.file, lineOf(b.pos, path), path, fmt.Sprintf(format, args...))
}

// has reports whether the file spells out path.
func (b *builder) has(path string) bool { _, ok := b.pos[path]; return ok }

func (b *builder) build(fc *fileConfig, data []byte) *Config {
	cfg := &Config{File: b.file, pos: b.pos}
	cfg.Server = b.server(fc.Server, data)
	if len(fc.Workspaces) == 0 {
		b.fail("workspaces", "no workspaces are declared; expected at least one")
	}
	seenWS := map[string]string{}
	type claim struct{ ws, path string }
	scopeOwner := map[[2]string]claim{}
	for i := range fc.Workspaces {
		at := fmt.Sprintf("workspaces[%d]", i)
		ws := b.workspace(&fc.Workspaces[i], at)
		if ws.ID != "" {
			if prev, dup := seenWS[ws.ID]; dup {
				b.fail(at+".id", "workspace id %q is already used by %s; workspace ids are unique in the file", ws.ID, prev)
			} else {
				seenWS[ws.ID] = at
			}
		}
		for _, field := range sortedKeys(ws.Scopes) {
			for j, v := range ws.Scopes[field] {
				key := [2]string{field, v}
				vat := fmt.Sprintf("%s[%d]", join(at+".scopes", field), j)
				if prev, dup := scopeOwner[key]; dup {
					if prev.ws == ws.ID {
						b.fail(vat, "scope value %q is listed twice", v)
					} else {
						b.fail(vat, "scope value %s %q already belongs to workspace %q (%s); a scope value belongs to one workspace, or WORKSPACE_REFUSED could not be decided", field, v, prev.ws, prev.path)
					}
					continue
				}
				scopeOwner[key] = claim{ws.ID, vat}
			}
		}
		cfg.Workspaces = append(cfg.Workspaces, ws)
	}
	if fc.Identity != nil {
		cfg.Identity = b.identity(fc.Identity, cfg)
	}
	return cfg
}

func (b *builder) server(fs *fileServer, data []byte) Server {
	s := Server{
		Listen:             DefaultListen,
		ApprovalTTL:        DefaultApprovalTTL,
		WebhookRetention:   DefaultWebhookRetention,
		AuditSecretEnv:     DefaultAuditSecretEnv,
		CheckpointKeyEnv:   DefaultCheckpointKeyEnv,
		RatePerSecond:      DefaultRatePerSecond,
		RateBurst:          DefaultRateBurst,
		MaxShadowProposals: DefaultMaxShadowProposals,
	}
	// Derived from the whole file so every replica reading it agrees; see
	// Server.AuditSecret for why this is only a fallback.
	sum := sha256.Sum256(append([]byte("ladder audit secret v1\n"), data...))
	s.derivedSecret = sum[:]
	if fs == nil {
		s.PublicURL = "http://" + s.Listen
		return s
	}
	if fs.Listen != "" {
		if _, _, err := net.SplitHostPort(fs.Listen); err != nil {
			b.fail("server.listen", "%q is not host:port (e.g. 127.0.0.1:8080 or :8080)", fs.Listen)
		}
		s.Listen = fs.Listen
	}
	s.PublicURL = "http://" + s.Listen
	if fs.PublicURL != "" {
		u, err := url.Parse(fs.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			b.fail("server.public_url", "%q is not an http(s) base URL; expected e.g. https://ladder.example.com", fs.PublicURL)
		}
		s.PublicURL = strings.TrimRight(fs.PublicURL, "/")
	}
	if fs.ApprovalTTL != "" {
		s.ApprovalTTL = b.duration("server.approval_ttl", fs.ApprovalTTL, DefaultApprovalTTL)
	}
	if fs.WebhookRetention != "" {
		s.WebhookRetention = b.duration("server.webhook_retention", fs.WebhookRetention, DefaultWebhookRetention)
	}
	if fs.AuditSecretEnv != "" {
		if !envPattern.MatchString(fs.AuditSecretEnv) {
			b.fail("server.audit_secret_env", "%q is not an environment variable name; expected letters, digits and _ (the secret itself never goes in this file)", fs.AuditSecretEnv)
		}
		s.AuditSecretEnv = fs.AuditSecretEnv
	}
	if fs.CheckpointKeyEnv != "" {
		if !envPattern.MatchString(fs.CheckpointKeyEnv) {
			b.fail("server.checkpoint_key_env", "%q is not an environment variable name; expected letters, digits and _ (the key itself never goes in this file)", fs.CheckpointKeyEnv)
		}
		s.CheckpointKeyEnv = fs.CheckpointKeyEnv
	}
	if rl := fs.RateLimit; rl != nil {
		if rl.PerSecond != nil {
			if v := *rl.PerSecond; !(v > 0) || math.IsInf(v, 0) {
				b.fail("server.rate_limit.per_second", "%v is not a positive number of requests per second", v)
			} else {
				s.RatePerSecond = v
			}
		}
		if rl.Burst != nil {
			if *rl.Burst < 1 {
				b.fail("server.rate_limit.burst", "%d is below 1; expected the number of requests a key may send at once", *rl.Burst)
			} else {
				s.RateBurst = *rl.Burst
			}
		}
	}
	if fs.MaxShadow != nil {
		if *fs.MaxShadow < 1 {
			b.fail("server.max_shadow_proposals", "%d is below 1; expected how many unreviewed shadow proposals one key may keep per step", *fs.MaxShadow)
		} else {
			s.MaxShadowProposals = *fs.MaxShadow
		}
	}
	for i, o := range fs.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			b.fail(fmt.Sprintf("server.allowed_origins[%d]", i), "%q is not an origin; expected scheme://host[:port], e.g. https://console.example.com", o)
			continue
		}
		s.AllowedOrigins = append(s.AllowedOrigins, u.Scheme+"://"+u.Host)
	}
	return s
}

// duration parses a Go duration that must be positive; on error it reports
// and returns def so checking can go on.
func (b *builder) duration(path, v string, def time.Duration) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil {
		b.fail(path, "%q is not a duration; expected a Go duration such as 10s, 1500ms, 72h", v)
		return def
	}
	if d <= 0 {
		b.fail(path, "%q is not positive; expected a duration above zero", v)
		return def
	}
	return d
}

func (b *builder) id(path, kind, v string) {
	switch {
	case v == "":
		b.fail(path, "%s id is missing; expected a non-empty id", kind)
	case !idPattern.MatchString(v):
		b.fail(path, "%q is not a valid %s id; expected up to 64 letters, digits, '_', '-' or '.', starting with a letter or digit", v, kind)
	}
}

func (b *builder) workspace(fw *fileWorkspace, at string) Workspace {
	ws := Workspace{ID: fw.ID, Name: fw.Name, Scopes: map[string][]string{}, path: at}
	b.id(at+".id", "workspace", fw.ID)
	for _, field := range sortedKeys(fw.Scopes) {
		fat := join(at+".scopes", field)
		if !idPattern.MatchString(field) {
			b.fail(fat, "%q is not a valid scope field; expected a name such as program", field)
		}
		if len(fw.Scopes[field]) == 0 {
			b.fail(fat, "scope field %q lists no values; expected the values that belong to this workspace", field)
		}
		for j, v := range fw.Scopes[field] {
			if v == "" {
				b.fail(fmt.Sprintf("%s[%d]", fat, j), "scope value is empty")
			}
		}
		ws.Scopes[field] = fw.Scopes[field]
	}

	stepAt := map[string]string{}
	nameAt := map[string]string{}
	queueAt := map[string]string{}
	for qi, fq := range fw.Queues {
		qat := fmt.Sprintf("%s.queues[%d]", at, qi)
		b.id(qat+".id", "queue", fq.ID)
		if prev, dup := queueAt[fq.ID]; dup && fq.ID != "" {
			b.fail(qat+".id", "queue id %q is already used by %s; queue ids are unique in a workspace", fq.ID, prev)
		}
		queueAt[fq.ID] = qat
		q := Queue{ID: fq.ID, Name: fq.Name}
		for si := range fq.Steps {
			sat := fmt.Sprintf("%s.steps[%d]", qat, si)
			s := b.step(&fq.Steps[si], fq.ID, sat)
			if s.ID != "" {
				if prev, dup := stepAt[s.ID]; dup {
					b.fail(sat+".id", "step id %q is already used by %s; step ids are unique in a workspace, so a step can be named without its queue", s.ID, prev)
				}
				stepAt[s.ID] = sat
			}
			if key := nameKey(s.Name); key != "" {
				if prev, dup := nameAt[key]; dup {
					b.fail(sat+".name", "step name %q matches the name at %s; step_evidence finds steps by plain name, so names must differ in more than case and punctuation", s.Name, prev)
				}
				nameAt[key] = sat
			}
			q.Steps = append(q.Steps, s)
		}
		ws.Queues = append(ws.Queues, q)
	}

	fns := b.gateCases(fw.GateCases, at, &ws)
	ws.GateCases = fw.GateCases

	capAt := map[string]string{}
	portableAt := map[string]string{}
	for ci := range fw.Capabilities {
		cat := fmt.Sprintf("%s.capabilities[%d]", at, ci)
		id := fw.Capabilities[ci].ID
		if id != "" && capPattern.MatchString(id) {
			// Before the capability's own checks, so the clash is the first
			// thing said about it.
			if prev, dup := capAt[id]; dup {
				b.fail(cat+".id", "capability id %q is already used by %s; capability ids are unique in a workspace", id, prev)
			} else {
				capAt[id] = cat
				p := strings.ReplaceAll(id, ":", "_")
				if prev, dup := portableAt[p]; dup {
					b.fail(cat+".id", "capability id %q has the same portable tool name %q as %s; rename one", id, p, prev)
				}
				portableAt[p] = cat
				for _, t := range builtinTools {
					if p == t {
						b.fail(cat+".id", "capability id %q has the portable tool name %q of a built-in tool; rename it", id, p)
					}
				}
			}
		}
		ws.Capabilities = append(ws.Capabilities, b.capability(&fw.Capabilities[ci], cat, &ws, fns))
	}
	ws.Webhooks = b.webhooks(fw.Webhooks, at)
	ws.Slack = b.slack(fw.Slack, at)
	return ws
}

// nameKey folds a plain name the way step_evidence matches names: case and
// punctuation do not count.
func nameKey(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func (b *builder) step(fs *fileStep, queue, at string) Step {
	s := Step{Step: ladder.Step{ID: fs.ID, Name: fs.Name, Queue: queue, MoneyMoving: fs.MoneyMoving}, Description: fs.Description}
	b.id(at+".id", "step", fs.ID)
	if strings.TrimSpace(fs.Name) == "" {
		b.fail(at+".name", "name is missing; expected the plain name people ask by, e.g. \"Post to the TMS\"")
	}
	switch fs.Class {
	case "":
		s.Class = ladder.ClassB
		if fs.MoneyMoving {
			s.Class = ladder.ClassA
		}
	case string(ladder.ClassA):
		s.Class = ladder.ClassA
	case string(ladder.ClassB):
		s.Class = ladder.ClassB
		if fs.MoneyMoving {
			b.fail(at+".class", "a money-moving step is class A; class B would let it act alone on weaker evidence (remove class or money_moving)")
		}
	default:
		b.fail(at+".class", "%q is not a risk class; expected A (money-moving) or B", fs.Class)
	}
	switch {
	case fs.Lane == "":
		s.StartLane = ladder.LaneShadow
	case ladder.Lane(fs.Lane).Valid():
		s.StartLane = ladder.Lane(fs.Lane)
	default:
		names := make([]string, len(ladder.Lanes))
		for i, l := range ladder.Lanes {
			names[i] = string(l)
		}
		b.fail(at+".lane", "%q is not a lane; expected one of %s", fs.Lane, strings.Join(names, ", "))
	}
	if fs.AuditRate != nil {
		if r := *fs.AuditRate; !(r > 0 && r <= 1) {
			b.fail(at+".audit_rate", "%v is not a rate; expected a share in (0, 1], e.g. 0.1", r)
		} else {
			s.AuditRate = r
		}
	}
	if fs.WeeklyVolume != nil {
		if v := *fs.WeeklyVolume; v < 1 {
			b.fail(at+".weekly_volume", "%d is not a volume; expected a positive number of items per week", v)
		} else {
			s.WeeklyVolume = v
		}
	}
	if fs.Rules != nil {
		s.Rules = *fs.Rules
		if err := rules.Defaults(s.Class).With(fs.Rules).Validate(); err != nil {
			for _, e := range flatten(err) {
				msg := e.Error()
				path := at + ".rules"
				if name, rest, ok := strings.Cut(msg, ": "); ok && b.has(path+"."+name) {
					path, msg = path+"."+name, rest
				}
				b.fail(path, "%s (class %s defaults apply to the fields not given)", msg, s.Class)
			}
		}
	}
	return s
}

// fnRef is what a capability may name in its gate: the authorizable
// functions of a case and its bypass commits (named to explain the refusal).
type fnRef struct {
	fns    map[string]bool
	schema map[string]map[string]any // evidence schema by function name
	bypass map[string]bool
	broken bool // the case did not compile; its fault is already reported
}

// gateCases compiles each case on its own, so every broken case is reported
// rather than only the first, then compiles them together for the workspace.
func (b *builder) gateCases(cases []gate.Case, at string, ws *Workspace) map[string]fnRef {
	refs := map[string]fnRef{}
	caseAt := map[string]string{}
	ok := true
	for ci := range cases {
		c := &cases[ci]
		cat := fmt.Sprintf("%s.gate_cases[%d]", at, ci)
		if c.ID != "" {
			if prev, dup := caseAt[c.ID]; dup {
				b.fail(cat+".id", "gate case id %q is already used by %s; case ids are unique in a workspace", c.ID, prev)
				ok = false
				continue
			}
			caseAt[c.ID] = cat
		}
		if _, err := gate.Compile([]gate.Case{*c}); err != nil {
			b.gateError(err, c, cat)
			ok = false
			if c.ID != "" {
				refs[c.ID] = fnRef{broken: true}
			}
			continue
		}
		ref := fnRef{fns: map[string]bool{}, schema: map[string]map[string]any{}, bypass: map[string]bool{}}
		for _, cm := range c.Commits {
			if cm.BypassToHuman {
				ref.bypass[cm.ID] = true
			} else if cm.Fn != nil {
				ref.fns[cm.Fn.Name] = true
				ref.schema[cm.Fn.Name] = cm.Fn.Evidence
			}
		}
		refs[c.ID] = ref
	}
	if ok {
		g, err := gate.Compile(cases)
		if err != nil {
			// Each case compiled alone; together they can only clash.
			b.fail(at+".gate_cases", "%v", err)
		}
		ws.gate = g
	}
	return refs
}

var celPos = regexp.MustCompile(`^ERROR: <input>:(\d+):(\d+): `)

// gateError turns a *gate.CompileError into a fault at the line of the field
// it names; for a CEL error, at the line inside the expression.
func (b *builder) gateError(err error, c *gate.Case, cat string) {
	var ce *gate.CompileError
	if !errors.As(err, &ce) {
		b.fail(cat, "gate case does not compile: %v", err)
		return
	}
	base := cat
	if ce.Function != "" {
		for k, cm := range c.Commits {
			if cm.Fn != nil && cm.Fn.Name == ce.Function {
				base = fmt.Sprintf("%s.commits[%d].precondition_fn", cat, k)
				break
			}
		}
	}
	field := ce.Field
	if strings.HasPrefix(field, "[") {
		// "[0].id": the index is into the one-case slice compiled.
		if _, rest, ok := strings.Cut(field, "]."); ok {
			field = rest
		}
	}
	path := base
	if field != "" {
		path = joinPath(base, field)
	}
	line := lineOf(b.pos, path)
	msg := ""
	if err := ce.Err; err != nil {
		msg = err.Error()
	}
	if ce.Expr != "" {
		first, _, _ := strings.Cut(msg, "\n")
		if m := celPos.FindStringSubmatch(first); m != nil && b.has(path) {
			var l, col int
			fmt.Sscan(m[1], &l)
			fmt.Sscan(m[2], &col)
			// The expression starts on the key's line, or on the next one
			// when it is a block scalar (R: |).
			if b.block[path] {
				line += l
			} else {
				line += l - 1
			}
			first = fmt.Sprintf("%s (at column %d of the expression)", strings.TrimPrefix(first, m[0]), col)
		}
		msg = fmt.Sprintf("CEL expression does not compile: %s", first)
	}
	b.errs.add(b.file, line, path, msg)
}

// joinPath appends a dotted sub-path (as gate errors spell fields, e.g.
// "evidence.properties.x.type" or "commits[0].id") to a field path.
func joinPath(base, sub string) string {
	if strings.HasPrefix(sub, "[") {
		return base + sub
	}
	return base + "." + sub
}

func (b *builder) capability(fc *fileCapability, at string, ws *Workspace, fns map[string]fnRef) ladder.Capability {
	c := ladder.Capability{
		ID:          fc.ID,
		Title:       fc.Title,
		Description: fc.Description,
		Payload:     fc.PayloadSchema,
		ScopeFields: fc.ScopeFields,
		HumanGate:   fc.HumanGate,
		ReadOnly:    fc.ReadOnly,
		Served:      fc.Served == nil || *fc.Served,
		Step:        fc.Step,
		Item:        fc.Item,

		MaxPayloadBytes:  b.sizeLimit(fc.MaxPayload, at+".max_payload_bytes"),
		MaxEvidenceBytes: b.sizeLimit(fc.MaxEvidence, at+".max_evidence_bytes"),
	}
	switch {
	case fc.ID == "":
		b.fail(at+".id", "capability id is missing; expected domain:action, e.g. tms:postBill")
	case !capPattern.MatchString(fc.ID):
		b.fail(at+".id", "%q is not a capability id; expected domain:action, e.g. tms:postBill (letters, digits, '_' and '-' on each side of one ':')", fc.ID)
	}
	if strings.TrimSpace(fc.Title) == "" {
		b.fail(at+".title", "title is missing; expected a short human title of the tool")
	}
	if strings.TrimSpace(fc.Description) == "" {
		b.fail(at+".description", "description is missing; expected what the call does, what to call first and its side effects")
	}
	if fc.PayloadSchema != nil {
		b.payloadSchema(fc.PayloadSchema, at+".payload_schema")
		// Scope travels only as scope: a payload property named like a
		// scope field would reach the upstream beside the checked scope.
		props, _ := fc.PayloadSchema["properties"].(map[string]any)
		scopes := append([]string{"workspace", "scope"}, sortedKeys(ws.Scopes)...)
		for _, name := range sortedKeys(props) {
			for _, r := range []string{"payload", "evidence", "idempotency_key"} {
				if strings.EqualFold(name, r) {
					b.fail(join(at+".payload_schema.properties", name), "payload property %q is named like the call argument %q, which a call sends beside the payload; rename the property", name, r)
				}
			}
			for _, sc := range scopes {
				if strings.EqualFold(name, sc) {
					b.fail(join(at+".payload_schema.properties", name), "payload property %q is named like the scope %q; scope travels only in the scope fields (scope_fields), which are checked against the caller's workspace, so rename the property", name, sc)
				}
			}
		}
	}
	seen := map[string]bool{}
	for i, f := range fc.ScopeFields {
		fat := fmt.Sprintf("%s.scope_fields[%d]", at, i)
		switch {
		case seen[f]:
			b.fail(fat, "scope field %q is listed twice", f)
		case len(ws.Scopes[f]) == 0:
			b.fail(fat, "scope field %q is not among the workspace's scopes (%s); every call would be refused", f, orNone(sortedKeys(ws.Scopes)))
		}
		seen[f] = true
	}
	if fc.Step != "" {
		if _, ok := ws.FindStep("", fc.Step); !ok {
			b.fail(at+".step", "no step %q in workspace %q; expected a step id or queue/step (%s)", fc.Step, ws.ID, orNone(stepIDs(ws)))
		} else {
			b.item(fc, at)
		}
	} else {
		b.item(fc, at)
	}
	if g := fc.Gate; g != nil {
		c.Gate = &ladder.CapabilityGate{Case: g.Case, Fn: g.PreconditionFn}
		ref, ok := fns[g.Case]
		switch {
		case g.Case == "":
			b.fail(at+".gate.case", "gate case is missing; expected the id of a gate case of this workspace")
		case ref.broken:
		case !ok:
			b.fail(at+".gate.case", "no gate case %q in workspace %q (%s)", g.Case, ws.ID, orNone(caseIDs(ws.GateCases)))
		case g.PreconditionFn == "":
			b.fail(at+".gate.precondition_fn", "precondition function is missing; expected a function of case %q (%s)", g.Case, orNone(sortedKeys(ref.fns)))
		case ref.bypass[g.PreconditionFn]:
			b.fail(at+".gate.precondition_fn", "%q is a bypass_to_human commit, which evidence never authorizes; set human_gate: true instead", g.PreconditionFn)
		case !ref.fns[g.PreconditionFn]:
			b.fail(at+".gate.precondition_fn", "case %q has no precondition function %q (%s)", g.Case, g.PreconditionFn, orNone(sortedKeys(ref.fns)))
		default:
			c.Gate.Bind = b.bind(g.Bind, ref.schema[g.PreconditionFn], fc.PayloadSchema, at+".gate.bind")
		}
	}
	c.Executor = b.executor(fc.Executor, at+".executor", c.Served)
	return c
}

// item checks a capability's item field: a step-tied capability must name
// the payload field that identifies its work item, and that field must be
// a required string or integer property of the payload schema at every
// level, so every valid call names an item.
func (b *builder) item(fc *fileCapability, at string) {
	switch {
	case fc.Step == "" && fc.Item == "":
		return
	case fc.Step == "":
		b.fail(at+".item", "item only applies to a capability tied to a step; add step or remove item")
		return
	case fc.Item == "":
		b.fail(at+".item", "item is missing; a capability tied to a step names the payload field that identifies its work item (e.g. item: bill_id), so the route and the audit sample fall on that item and not on a value the agent picks")
		return
	}
	path, err := ladder.ItemPath(fc.Item)
	if err != nil {
		b.fail(at+".item", "%v; expected a property name (bill_id) or a JSON pointer (/bill/id)", err)
		return
	}
	schema := fc.PayloadSchema
	for i, seg := range path {
		props, _ := schema["properties"].(map[string]any)
		prop, ok := props[seg].(map[string]any)
		if !ok {
			b.fail(at+".item", "item %q names %q, which is not a property of the payload schema (%s); expected a required property that identifies the work item", fc.Item, seg, orNone(sortedKeys(props)))
			return
		}
		if !required(schema, seg) {
			b.fail(at+".item", "item %q names %q, which the payload schema does not require; add it to required so every call names its item", fc.Item, seg)
			return
		}
		t, _ := prop["type"].(string)
		if i < len(path)-1 {
			if t != "object" {
				b.fail(at+".item", "item %q goes through %q, whose type is %s; expected object", fc.Item, seg, showValue(prop["type"]))
				return
			}
		} else if t != "string" && t != "integer" {
			b.fail(at+".item", "item %q names %q, whose type is %s; expected string or integer", fc.Item, seg, showValue(prop["type"]))
			return
		}
		schema = prop
	}
}

// bind checks a gate's binding of evidence to payload: at least one pair;
// each evidence field a required property of the evidence schema, each
// payload field a required property of the payload schema (so every valid
// call has both sides), and the two of one type.
func (b *builder) bind(bind map[string]string, evidence, payload map[string]any, at string) map[string]string {
	if len(bind) == 0 {
		b.fail(at, "bind is missing; a gated capability names which evidence fields must equal which payload fields (e.g. bind: {bill_id: bill_id}), so evidence gathered for one action never authorizes another")
		return nil
	}
	for _, ef := range sortedKeys(bind) {
		pat := join(at, ef)
		eprop, ok := propertyAt(evidence, []string{ef})
		if !ok || !required(evidence, ef) {
			b.fail(pat, "%q is not a required property of the precondition function's evidence schema; bind a field every evidence must carry", ef)
			continue
		}
		path, err := ladder.ItemPath(bind[ef])
		if err != nil {
			b.fail(pat, "%v; expected a payload property name or a JSON pointer", err)
			continue
		}
		pprop, ok := propertyAt(payload, path)
		if !ok {
			b.fail(pat, "payload field %q is not a required property of the payload schema; bind to a field every call must carry", bind[ef])
			continue
		}
		if et, pt := eprop["type"], pprop["type"]; fmt.Sprint(et) != fmt.Sprint(pt) {
			b.fail(pat, "evidence field %q is of type %s and payload field %q of type %s; bound fields must have one type", ef, showValue(et), bind[ef], showValue(pt))
		}
	}
	return bind
}

// propertyAt walks schema's properties along path, each step a required
// property, and returns the last one's schema.
func propertyAt(schema map[string]any, path []string) (map[string]any, bool) {
	for _, seg := range path {
		props, _ := schema["properties"].(map[string]any)
		prop, ok := props[seg].(map[string]any)
		if !ok || !required(schema, seg) {
			return nil, false
		}
		schema = prop
	}
	return schema, true
}

// DefaultMaxArgBytes is a capability's payload and evidence limit when the
// config sets none.
const DefaultMaxArgBytes = 64 << 10

// sizeLimit checks a capability's payload or evidence limit (0: the
// default). A request body is at most 1 MiB, so a larger limit could never
// be met.
func (b *builder) sizeLimit(n int, at string) int {
	switch {
	case n == 0:
		return DefaultMaxArgBytes
	case n < 0 || n > 1<<20:
		b.fail(at, "%d is out of range; expected 1 to 1048576 bytes (a request body is at most 1 MiB)", n)
	}
	return n
}

// required reports whether schema lists name among its required properties.
func required(schema map[string]any, name string) bool {
	switch r := schema["required"].(type) {
	case []any:
		for _, v := range r {
			if v == name {
				return true
			}
		}
	case []string:
		return slices.Contains(r, name)
	}
	return false
}

func (b *builder) executor(fe *fileExecutor, at string, served bool) ladder.Executor {
	e := ladder.Executor{Timeout: DefaultTimeout}
	if fe == nil {
		if served {
			b.fail(at, "executor is missing; expected kind http, mcp or record")
		} else {
			// Declared, not served: nothing will run it yet.
			e.Kind = ladder.ExecRecord
		}
		return e
	}
	e.Kind, e.URL, e.Tool = fe.Kind, fe.URL, fe.Tool
	e.Headers, e.HeadersFromEnv = fe.Headers, fe.HeadersFromEnv
	switch fe.Kind {
	case ladder.ExecHTTP, ladder.ExecMCP:
		if fe.URL == "" {
			b.fail(at+".url", "url is missing; an %s executor needs the upstream URL (http://, https:// or demo:NAME)", fe.Kind)
		} else if !validUpstream(fe.URL) {
			b.fail(at+".url", "%q is not an upstream URL; expected http://host/…, https://host/… or demo:NAME", fe.URL)
		}
		if fe.Kind == ladder.ExecMCP && fe.Tool == "" {
			b.fail(at+".tool", "tool is missing; an mcp executor calls one tool of the upstream server")
		}
		if fe.Kind == ladder.ExecHTTP && fe.Tool != "" {
			b.fail(at+".tool", "tool is only for kind mcp; an http executor POSTs to url")
		}
	case ladder.ExecRecord:
		for _, f := range []struct{ name, v string }{{"url", fe.URL}, {"tool", fe.Tool}, {"timeout", fe.Timeout}} {
			if f.v != "" {
				b.fail(at+"."+f.name, "%s is not used by kind record, which runs nothing; remove it or choose http or mcp", f.name)
			}
		}
	case "":
		b.fail(at+".kind", "kind is missing; expected one of http, mcp, record")
	default:
		b.fail(at+".kind", "%q is not an executor kind; expected one of http, mcp, record", fe.Kind)
	}
	if fe.Timeout != "" {
		e.Timeout = b.duration(at+".timeout", fe.Timeout, DefaultTimeout)
	}
	for _, h := range sortedKeys(fe.Headers) {
		hat := join(at+".headers", h)
		if !headerPattern.MatchString(h) {
			b.fail(hat, "%q is not a header name", h)
		} else if credentialHeader(h) {
			b.fail(hat, "header %q looks like a credential; put it in headers_from_env so its value stays out of this file", h)
		}
	}
	for _, h := range sortedKeys(fe.HeadersFromEnv) {
		hat := join(at+".headers_from_env", h)
		if !headerPattern.MatchString(h) {
			b.fail(hat, "%q is not a header name", h)
		}
		if v := fe.HeadersFromEnv[h]; !envPattern.MatchString(v) {
			b.fail(hat, "%q is not an environment variable name; expected letters, digits and _", v)
		}
		if _, both := fe.Headers[h]; both {
			b.fail(hat, "header %q is also in headers; give it once", h)
		}
	}
	return e
}

func validUpstream(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "http", "https":
		return u.Host != ""
	case DemoScheme:
		return u.Opaque != "" && idPattern.MatchString(u.Opaque)
	}
	return false
}

func credentialHeader(h string) bool {
	l := strings.ToLower(h)
	switch l {
	case "authorization", "proxy-authorization", "cookie":
		return true
	}
	for _, s := range []string{"token", "secret", "api-key", "apikey", "password"} {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// payloadSchema checks a capability's payload schema: an object schema
// whose every property has a type and a description (agents see nothing
// else about what to send), and one the JSON Schema validator accepts.
func (b *builder) payloadSchema(s map[string]any, at string) {
	if t, _ := s["type"].(string); t != "object" {
		b.fail(at+".type", "the payload schema's type is %s; expected \"object\"", showValue(s["type"]))
	}
	b.documented(s, at)
	raw, err := json.Marshal(s)
	if err != nil {
		b.fail(at, "the payload schema has no JSON form: %v", err)
		return
	}
	var js jsonschema.Schema
	if err := json.Unmarshal(raw, &js); err != nil {
		b.fail(at, "not a JSON Schema: %v", err)
		return
	}
	if _, err := js.Resolve(nil); err != nil {
		b.fail(at, "not a valid JSON Schema: %v", err)
	}
}

func (b *builder) documented(s map[string]any, at string) {
	if props, ok := s["properties"]; ok && props != nil {
		pm, ok := props.(map[string]any)
		if !ok {
			b.fail(at+".properties", "properties is %s; expected a mapping of property names to schemas", showValue(props))
			return
		}
		for _, name := range sortedKeys(pm) {
			pat := join(at+".properties", name)
			p, ok := pm[name].(map[string]any)
			if !ok {
				b.fail(pat, "property %q is %s; expected a schema with type and description", name, showValue(pm[name]))
				continue
			}
			if _, ok := p["type"]; !ok {
				b.fail(pat, "property %q has no type; every property needs a type and a description", name)
			}
			if d, _ := p["description"].(string); strings.TrimSpace(d) == "" {
				b.fail(pat, "property %q has no description; every property needs a type and a description", name)
			}
			b.documented(p, pat)
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		b.documented(items, at+".items")
	}
}

func showValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "missing"
	case string:
		return fmt.Sprintf("%q", v)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%v", v)
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none are declared"
	}
	if len(names) > 12 {
		names = append(names[:12:12], "…")
	}
	return "declared: " + strings.Join(names, ", ")
}

func stepIDs(ws *Workspace) []string {
	var out []string
	for _, q := range ws.Queues {
		for _, s := range q.Steps {
			out = append(out, s.ID)
		}
	}
	return out
}

func caseIDs(cases []gate.Case) []string {
	out := make([]string, 0, len(cases))
	for _, c := range cases {
		out = append(out, c.ID)
	}
	return out
}

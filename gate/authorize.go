package gate

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"

	"github.com/ladderhq/ladder"
)

// Cases lists every case with its authorizable functions, in declaration
// order; bypass_to_human commits are left out because evidence cannot
// authorize them.
func (g *Gate) Cases() []ladder.GateCaseInfo {
	out := make([]ladder.GateCaseInfo, len(g.cases))
	for i, c := range g.cases {
		out[i] = c.info
		out[i].Functions = slices.Clone(c.info.Functions)
	}
	return out
}

// Functions lists the authorizable functions of one case, in declaration
// order. The error is a *LookupError (ErrUnknownCase) for an unknown case.
func (g *Gate) Functions(caseID string) ([]ladder.GateFunctionInfo, error) {
	c, err := g.lookupCase(caseID)
	if err != nil {
		return nil, err
	}
	return slices.Clone(c.info.Functions), nil
}

func (g *Gate) lookupCase(caseID string) (*compiledCase, error) {
	c, ok := g.byID[caseID]
	if !ok {
		return nil, &LookupError{
			Err: ErrUnknownCase, Case: caseID, Name: caseID, Valid: slices.Clone(g.caseIDs),
			Hint: "call {{gate_functions}} without a case to see every case and its functions",
		}
	}
	return c, nil
}

// Authorize decides whether evidence lets the commit guarded by function fn
// of case caseID go ahead.
//
// The error is non-nil only when there is nothing to decide on: a
// *LookupError for an unknown case or function, or for a bypass_to_human
// commit, and an *EvidenceError when evidence does not match the function's
// schema. For a bypass_to_human commit (fn is its commit id) the Decision is
// filled as well — BYPASS_TO_HUMAN, BYPASS_HUMAN_JUDGMENT_REQUIRED — so the
// caller can record the refusal. An evaluator fault is not an error: the gate
// fails closed with BYPASS_TO_HUMAN and EVALUATOR_FAULT.
//
// Authorize does not modify evidence.
func (g *Gate) Authorize(caseID, fn string, evidence map[string]any) (Decision, error) {
	return g.AuthorizeBound(caseID, fn, evidence, nil)
}

// AuthorizeBound is Authorize for evidence submitted with an action: bound
// maps evidence fields to the values the action names (the bill the call
// pays, say). Evidence whose bound field is absent or holds another value
// is not scored: the decision is ESCALATE with EVIDENCE_NOT_BOUND_TO_PAYLOAD,
// so evidence gathered for one action never authorizes another. Values
// compare as BoundValue spells them.
func (g *Gate) AuthorizeBound(caseID, fn string, evidence map[string]any, bound map[string]string) (Decision, error) {
	c, err := g.lookupCase(caseID)
	if err != nil {
		return Decision{}, err
	}
	f, ok := c.fns[fn]
	if !ok {
		if c.bypass[fn] {
			d := Decision{
				GateState: StateBypassToHuman, SchemaVersion: SchemaVersion,
				Case: caseID, CommitID: fn, ReasonCode: ReasonBypassHumanJudgmentRequired,
				HumanReadable: fmt.Sprintf("Commit %s of case %s always needs a person; evidence alone never authorizes it. Ask a person to decide.", fn, caseID),
				Evidence:      evidence,
			}
			return d, &LookupError{
				Err: ErrBypassToHuman, Case: caseID, Name: fn, Valid: slices.Clone(c.fnNames),
				Hint: "a person must make this commit; request human approval instead of calling {{authorize}}",
			}
		}
		return Decision{}, &LookupError{
			Err: ErrUnknownFunction, Case: caseID, Name: fn, Valid: slices.Clone(c.fnNames),
			Hint: fmt.Sprintf("call {{gate_functions}} with case %q to see its functions and the evidence each expects", caseID),
		}
	}
	if evidence == nil {
		evidence = map[string]any{}
	}
	if err := f.validate(evidence); err != nil {
		return Decision{}, err
	}
	if d, held := c.unbound(f, evidence, bound); held {
		return d, nil
	}
	return c.decide(f, f.fillDefaults(evidence)), nil
}

// unbound reports the ESCALATE decision for evidence whose bound field is
// absent or names another value than the action's, checked before scoring.
func (c *compiledCase) unbound(f *compiledFn, evidence map[string]any, bound map[string]string) (Decision, bool) {
	if len(bound) == 0 {
		return Decision{}, false
	}
	fields := make([]string, 0, len(bound))
	for field := range bound {
		fields = append(fields, field)
	}
	slices.Sort(fields)
	for _, field := range fields {
		got, ok := BoundValue(evidence[field]) // absent or null: not ok
		if ok && got == bound[field] {
			continue
		}
		shown := "no " + field
		if ok {
			shown = fmt.Sprintf("%s %q", field, got)
		}
		return Decision{
			GateState: StateEscalate, SchemaVersion: SchemaVersion,
			Case: c.info.ID, PreconditionFn: f.name, CommitID: f.commitID, ReasonCode: ReasonEvidenceNotBound,
			HumanReadable: Redact(fmt.Sprintf("The evidence names %s but the action is for %s %q, so it was not scored: evidence authorizes only the action it describes. Send evidence gathered for this very action to %s.",
				shown, field, bound[field], f.commitName)),
			Evidence: evidence,
		}, true
	}
	return Decision{}, false
}

// BoundValue spells a JSON value the way AuthorizeBound compares it: a
// string as itself, a number as its literal (json.Number or float64). Other
// values cannot be bound.
func BoundValue(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case interface{ String() string }: // json.Number
		return x.String(), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	}
	return "", false
}

// scoring is the result of scoring one version of the evidence.
type scoring struct {
	dims       [4]float64 // R, C, O, Ro
	q          float64
	verifiable bool
}

// fault is an evaluator fault: which field failed and why.
type fault struct {
	field string
	err   error
}

// routeAutoRepair is the internal route between ESCALATE and PASS; it never
// leaves decide.
const routeAutoRepair = "AUTO_REPAIR"

// route is the routing rule of DESIGN.md §5, in its order: dry rounds
// exhausted, then τ_pass, then the repair band.
func (c *compiledCase) route(s scoring, dry int) string {
	switch {
	case dry >= c.kDry:
		return StateEscalate
	case s.q >= c.tauPass:
		return StatePass
	case s.q >= c.tauRepair && s.verifiable:
		return routeAutoRepair
	}
	return StateEscalate
}

// decide runs the routing loop of DESIGN.md §5 and builds the Decision.
func (c *compiledCase) decide(f *compiledFn, ev map[string]any) Decision {
	d := Decision{SchemaVersion: SchemaVersion, Case: c.info.ID, PreconditionFn: f.name, CommitID: f.commitID}
	var (
		s        scoring
		attempts int
		dry      int
	)
	finish := func(flt *fault) Decision {
		d.Scores = ladder.GateScores{Relevance: s.dims[0], Coverage: s.dims[1], Ordering: s.dims[2], Robustness: s.dims[3]}
		d.Q = s.q
		d.VerifiableExt = s.verifiable
		d.RepairAttempts = attempts
		d.AutoRepairAvailable = attempts > 0
		d.Evidence = ev
		if flt != nil {
			d.GateState, d.ReasonCode = StateBypassToHuman, ReasonEvaluatorFault
			d.HumanReadable = Redact(fmt.Sprintf("Evaluator fault in %s of %s (%v); the gate failed closed, so a person must decide %s.", flt.field, f.name, flt.err, f.commitName))
		}
		return d
	}

	// s changes only when a scoring completes: a fault reports the last
	// complete scoring, not a half-filled one.
	next, flt := f.score(ev, c.weights)
	if flt != nil {
		return finish(flt)
	}
	s = next
	for {
		if c.route(s, dry) != routeAutoRepair || len(f.repair) == 0 {
			break // AUTO_REPAIR without a repair is ESCALATE
		}
		if attempts >= maxRepairAttempts {
			return finish(&fault{field: "repair", err: fmt.Errorf("still changing the evidence after %d rounds", attempts)})
		}
		attempts++
		repaired, changed, flt := f.applyRepair(ev)
		if flt != nil {
			return finish(flt)
		}
		if !changed {
			// Expressions are deterministic, so scoring unchanged evidence
			// again would give s again; only the dry count moves.
			dry++
			continue
		}
		if err := f.validate(repaired); err != nil {
			return finish(&fault{field: "repair", err: fmt.Errorf("repaired evidence breaks the schema: %w", err)})
		}
		ev, dry = repaired, 0
		if next, flt = f.score(ev, c.weights); flt != nil {
			return finish(flt)
		}
		s = next
	}

	pass := c.route(s, dry) == StatePass
	switch {
	case pass:
		d.ReasonCode = ReasonPassAboveThreshold
	case s.q >= c.tauRepair && !s.verifiable:
		d.ReasonCode = ReasonGapNotExternallyVerifiable
	case attempts > 0 && dry >= c.kDry:
		d.ReasonCode = ReasonAutoRepairDryRoundsExhausted
	case s.q >= c.tauRepair && len(f.repair) == 0:
		d.ReasonCode = ReasonAutoRepairUnavailableNoRepairFn
	default:
		d.ReasonCode = ReasonQualityBelowRepairThreshold
	}
	below := -1
	if pass {
		for i, floor := range f.floors {
			if s.dims[i] < floor {
				below = i
				pass, d.ReasonCode = false, ReasonDimensionBelowFloor
				break
			}
		}
	}
	if pass && f.soft && f.promise != nil {
		promise, flt := evalBool(f.promise, "promise", ev)
		if flt != nil {
			return finish(flt)
		}
		if promise {
			feasible := false
			if f.feasible != nil {
				if feasible, flt = evalBool(f.feasible, "feasibility", ev); flt != nil {
					return finish(flt)
				}
			}
			if feasible {
				d.ReasonCode = ReasonSoftCommitPromiseSupported
			} else {
				pass, d.ReasonCode = false, ReasonSoftCommitPromiseUnsupported
			}
		}
	}
	// An ordering score of exactly 0 means the prerequisite step was not
	// done at all. That is the one thing the caller must fix first, and more
	// evidence on the other dimensions cannot make up for it, so it names the
	// refusal whatever else was short.
	if !pass && s.dims[2] == 0 {
		d.ReasonCode = ReasonOrderingPreconditionUnmet
	}
	if f.notes != nil {
		out, err := eval(f.notes, ev)
		if err != nil {
			return finish(&fault{field: "notes", err: err})
		}
		str, ok := out.(types.String)
		if !ok {
			return finish(&fault{field: "notes", err: fmt.Errorf("yields %s, want a string", out.Type().TypeName())})
		}
		d.Notes = Redact(string(str))
	}
	d.GateState = StateEscalate
	if pass {
		d.GateState = StatePass
	}
	d = finish(nil)
	d.HumanReadable = Redact(c.explain(f, &d, below))
	return d
}

// explain writes the human_readable sentence for a non-fault decision.
func (c *compiledCase) explain(f *compiledFn, d *Decision, below int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s scored Q=%.3f (R %.2f, C %.2f, O %.2f, Ro %.2f)", d.GateState, f.name, d.Q,
		d.Scores.Relevance, d.Scores.Coverage, d.Scores.Ordering, d.Scores.Robustness)
	if d.RepairAttempts > 0 {
		fmt.Fprintf(&b, " after %d repair attempt(s)", d.RepairAttempts)
	}
	b.WriteString("; ")
	switch d.ReasonCode {
	case ReasonPassAboveThreshold:
		fmt.Fprintf(&b, "that meets τ_pass %.2f, so %s may proceed.", c.tauPass, f.commitName)
	case ReasonSoftCommitPromiseSupported:
		fmt.Fprintf(&b, "that meets τ_pass %.2f and its promise is backed by feasibility evidence, so %s may proceed.", c.tauPass, f.commitName)
	case ReasonSoftCommitPromiseUnsupported:
		fmt.Fprintf(&b, "it contains a promise without feasibility evidence, so a person must approve %s.", f.commitName)
	case ReasonDimensionBelowFloor:
		fmt.Fprintf(&b, "%s is below its floor %.2f, so a person must approve %s.", dims[below], f.floors[below], f.commitName)
	case ReasonGapNotExternallyVerifiable:
		fmt.Fprintf(&b, "below τ_pass %.2f and the gap cannot be verified externally, so a person must approve %s.", c.tauPass, f.commitName)
	case ReasonAutoRepairDryRoundsExhausted:
		fmt.Fprintf(&b, "below τ_pass %.2f and %d repair rounds in a row brought nothing new, so a person must approve %s.", c.tauPass, c.kDry, f.commitName)
	case ReasonAutoRepairUnavailableNoRepairFn:
		fmt.Fprintf(&b, "below τ_pass %.2f and %s declares no repair, so a person must approve %s.", c.tauPass, f.name, f.commitName)
	case ReasonOrderingPreconditionUnmet:
		fmt.Fprintf(&b, "its ordering precondition is unmet (O is 0): do the prerequisite step first, or a person must approve %s.", f.commitName)
	default:
		fmt.Fprintf(&b, "below τ_repair %.2f, too weak to repair, so a person must approve %s.", c.tauRepair, f.commitName)
	}
	return b.String()
}

// score evaluates the four dimensions and verifiable_ext on ev.
func (f *compiledFn) score(ev map[string]any, w [4]float64) (scoring, *fault) {
	var s scoring
	act := &activation{evidence: types.DefaultTypeAdapter.NativeToValue(ev)}
	for i, prg := range f.scores {
		out, _, err := prg.Eval(act)
		if err != nil {
			return s, &fault{field: dims[i], err: err}
		}
		var x float64
		switch v := out.(type) {
		case types.Double:
			x = float64(v)
		case types.Int:
			x = float64(v)
		case types.Uint:
			x = float64(v)
		default:
			return s, &fault{field: dims[i], err: fmt.Errorf("yields %s, want a number in [0,1]", out.Type().TypeName())}
		}
		if !(x >= 0 && x <= 1) { // also catches NaN
			return s, &fault{field: dims[i], err: fmt.Errorf("yields %v, outside [0,1]", x)}
		}
		s.dims[i] = x
	}
	// Summed in the order R, C, O, Ro; the conversions round each product so
	// the compiler cannot fuse a multiply-add (Go spec, "Floating-point
	// operators"), which would move ties at τ_pass and τ_repair.
	s.q = float64(w[0]*s.dims[0]) + float64(w[1]*s.dims[1]) + float64(w[2]*s.dims[2]) + float64(w[3]*s.dims[3])
	out, _, err := f.verifiable.Eval(act)
	if err != nil {
		return s, &fault{field: "verifiable_ext", err: err}
	}
	b, ok := out.(types.Bool)
	if !ok {
		return s, &fault{field: "verifiable_ext", err: fmt.Errorf("yields %s, want a bool", out.Type().TypeName())}
	}
	s.verifiable = bool(b)
	return s, nil
}

// applyRepair evaluates every repair expression on ev and returns the
// repaired evidence and whether anything changed. ev is never modified.
func (f *compiledFn) applyRepair(ev map[string]any) (map[string]any, bool, *fault) {
	var next map[string]any
	for _, r := range f.repair {
		out, err := eval(r.prg, ev)
		if err != nil {
			return nil, false, &fault{field: "repair." + r.field, err: err}
		}
		v, err := toJSON(out)
		if err != nil {
			return nil, false, &fault{field: "repair." + r.field, err: err}
		}
		if old, ok := ev[r.field]; ok && jsonEqual(old, v) {
			continue
		}
		if next == nil {
			next = make(map[string]any, len(ev)+len(f.repair))
			for k, x := range ev {
				next[k] = x
			}
		}
		next[r.field] = v
	}
	if next == nil {
		return ev, false, nil
	}
	return next, true, nil
}

func eval(prg cel.Program, ev map[string]any) (ref.Val, error) {
	out, _, err := prg.Eval(&activation{evidence: types.DefaultTypeAdapter.NativeToValue(ev)})
	return out, err
}

func evalBool(prg cel.Program, field string, ev map[string]any) (bool, *fault) {
	out, err := eval(prg, ev)
	if err != nil {
		return false, &fault{field: field, err: err}
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, &fault{field: field, err: fmt.Errorf("yields %s, want a bool", out.Type().TypeName())}
	}
	return bool(b), nil
}

// activation binds the one variable, evidence, without the map allocation
// cel.Program.Eval would make for a map[string]any input.
type activation struct{ evidence ref.Val }

func (a *activation) ResolveName(name string) (any, bool) {
	if name == "evidence" {
		return a.evidence, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// fillDefaults returns a copy of ev with the schema defaults of absent
// properties filled in (false for booleans without a default), so that a
// missing flag counts as false rather than failing the expression. Numbers
// become float64 on the way: evidence is JSON, whose numbers are all CEL
// doubles, and a Go or YAML caller's int must not turn "evidence.r + 0.5"
// into a type error that JSON callers never see.
func (f *compiledFn) fillDefaults(ev map[string]any) map[string]any {
	out := make(map[string]any, len(ev)+len(f.defaults))
	for k, v := range ev {
		out[k] = jsonNumbers(v)
	}
	for _, d := range f.defaults {
		if _, ok := out[d.field]; !ok {
			out[d.field] = jsonNumbers(d.value)
		}
	}
	return out
}

// toJSON converts a CEL value to the Go form encoding/json decodes into
// (bool, float64, string, nil, []any, map[string]any), so repaired evidence
// looks like submitted evidence.
func toJSON(v ref.Val) (any, error) {
	switch v := v.(type) {
	case types.Bool:
		return bool(v), nil
	case types.Double:
		return float64(v), nil
	case types.Int:
		return float64(v), nil
	case types.Uint:
		return float64(v), nil
	case types.String:
		return string(v), nil
	case types.Null:
		return nil, nil
	case traits.Lister:
		n, _ := v.Size().(types.Int)
		out := make([]any, 0, int(n))
		for it := v.Iterator(); it.HasNext() == types.True; {
			x, err := toJSON(it.Next())
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	case traits.Mapper:
		out := map[string]any{}
		for it := v.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("yields a map with a %s key, want string keys", k.Type().TypeName())
			}
			x, err := toJSON(v.Get(k))
			if err != nil {
				return nil, err
			}
			out[string(ks)] = x
		}
		return out, nil
	}
	return nil, fmt.Errorf("yields %s, which has no JSON form", v.Type().TypeName())
}

// jsonEqual compares two JSON-like values, numbers by value whatever their Go
// type, so a repair giving 1.0 for a submitted int 1 counts as no change.
func jsonEqual(a, b any) bool {
	if x, ok := toFloat(a); ok {
		y, ok := toFloat(b)
		return ok && x == y
	}
	switch a := a.(type) {
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !jsonEqual(a[i], b[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, x := range a {
			y, ok := b[k]
			if !ok || !jsonEqual(x, y) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// jsonNumbers returns v with every number, nested ones included, as float64.
func jsonNumbers(v any) any {
	switch v := v.(type) {
	case bool, string, float64, nil:
		return v
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = jsonNumbers(x)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = jsonNumbers(x)
		}
		return out
	}
	if x, ok := toFloat(v); ok {
		return x
	}
	return v
}

func toFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case float32:
		return float64(v), true
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case int32:
		return float64(v), true
	case uint:
		return float64(v), true
	case uint64:
		return float64(v), true
	case uint32:
		return float64(v), true
	}
	return 0, false
}

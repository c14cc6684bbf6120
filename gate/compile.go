package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/ladderhq/ladder"
)

// costLimit bounds the work of one expression evaluation (about 0.15 s on the
// development machine). Evidence comes from agents, and a comprehension over
// a large evidence list must fail (closed, as EVALUATOR_FAULT) rather than
// stall the server. Legitimate scores over a few hundred items cost far less.
const costLimit = 100_000

// maxRepairAttempts bounds the repair loop. The routing rule ends a loop only
// when k_dry rounds in a row change nothing, so a repair that keeps changing
// the evidence (say, toggling a flag) would never end; past this many rounds
// the function is treated as faulty.
const maxRepairAttempts = 64

// dims are the dimension keys in the order Q sums them; Min, Weights and the
// CEL fields all use them.
var dims = [4]string{"R", "C", "O", "Ro"}

// Gate holds compiled cases. Build it with Compile.
type Gate struct {
	cases   []*compiledCase
	byID    map[string]*compiledCase
	caseIDs []string
}

type compiledCase struct {
	info      ladder.GateCaseInfo
	weights   [4]float64
	tauPass   float64
	tauRepair float64
	kDry      int
	fns       map[string]*compiledFn
	fnNames   []string
	bypass    map[string]bool // bypass_to_human commit ids
}

type compiledFn struct {
	name       string
	commitID   string
	commitName string
	soft       bool
	scores     [4]cel.Program
	verifiable cel.Program
	notes      cel.Program // nil when not declared
	promise    cel.Program // nil when not declared
	feasible   cel.Program // nil when not declared
	repair     []repairField
	floors     [4]float64  // -1 where no floor is declared
	flat       *flatSchema // nil unless the schema is flat; then it validates
	schema     *jsonschema.Resolved
	props      map[string]*jsonschema.Resolved // per top-level property, for naming the field at fault
	required   []string
	closed     bool // additionalProperties: false
	defaults   []fieldDefault
}

type repairField struct {
	field string
	prg   cel.Program
}

type fieldDefault struct {
	field string
	value any
}

// Compile checks the cases and compiles every CEL expression and evidence
// schema once, so Authorize only evaluates. Errors are *CompileError.
func Compile(cases []Case) (*Gate, error) {
	env, err := cel.NewEnv(
		cel.Variable("evidence", cel.MapType(cel.StringType, cel.DynType)),
		cel.CrossTypeNumericComparisons(true),
		ext.Math(),
		ext.Strings(),
	)
	if err != nil {
		return nil, fmt.Errorf("cel env: %w", err)
	}
	g := &Gate{byID: make(map[string]*compiledCase, len(cases))}
	for i := range cases {
		c := &cases[i]
		if c.ID == "" {
			return nil, &CompileError{Field: fmt.Sprintf("[%d].id", i), Err: errors.New("case id is empty")}
		}
		if _, dup := g.byID[c.ID]; dup {
			return nil, &CompileError{Case: c.ID, Field: "id", Err: errors.New("duplicate case id")}
		}
		cc, err := compileCase(env, c)
		if err != nil {
			return nil, err
		}
		g.cases = append(g.cases, cc)
		g.byID[c.ID] = cc
		g.caseIDs = append(g.caseIDs, c.ID)
	}
	return g, nil
}

func compileCase(env *cel.Env, c *Case) (*compiledCase, error) {
	fail := func(field string, err error) error {
		return &CompileError{Case: c.ID, Field: field, Err: err}
	}
	cc := &compiledCase{
		info:      ladder.GateCaseInfo{ID: c.ID, Name: c.Name, Description: c.Description, Functions: []ladder.GateFunctionInfo{}},
		weights:   [4]float64{DefaultWeight, DefaultWeight, DefaultWeight, DefaultWeight},
		tauPass:   DefaultTauPass,
		tauRepair: DefaultTauRepair,
		kDry:      DefaultKDry,
		fns:       map[string]*compiledFn{},
		bypass:    map[string]bool{},
	}
	if w := c.Weights; w != nil {
		cc.weights = [4]float64{w.R, w.C, w.O, w.Ro}
		sum := 0.0
		for i, x := range cc.weights {
			if !(x >= 0 && x <= 1) {
				return nil, fail("weights."+dims[i], fmt.Errorf("weight %v is outside [0,1]", x))
			}
			sum += x
		}
		// Q is compared with thresholds in [0,1]; weights that do not sum
		// to 1 would silently move every threshold.
		if math.Abs(sum-1) > 1e-9 {
			return nil, fail("weights", fmt.Errorf("weights sum to %v, want 1", sum))
		}
	}
	if c.TauPass != nil {
		cc.tauPass = *c.TauPass
	}
	if c.TauRepair != nil {
		cc.tauRepair = *c.TauRepair
	}
	if !(cc.tauPass >= 0 && cc.tauPass <= 1) {
		return nil, fail("tau_pass", fmt.Errorf("tau_pass %v is outside [0,1]", cc.tauPass))
	}
	if !(cc.tauRepair >= 0 && cc.tauRepair <= cc.tauPass) {
		return nil, fail("tau_repair", fmt.Errorf("tau_repair %v is outside [0, tau_pass %v]", cc.tauRepair, cc.tauPass))
	}
	if c.KDry != nil {
		cc.kDry = *c.KDry
	}
	if cc.kDry < 1 {
		return nil, fail("k_dry", fmt.Errorf("k_dry %d is below 1", cc.kDry))
	}
	if len(c.Commits) == 0 {
		return nil, fail("commits", errors.New("case declares no commits"))
	}
	commitIDs := map[string]bool{}
	for i := range c.Commits {
		cm := &c.Commits[i]
		at := fmt.Sprintf("commits[%d]", i)
		if cm.ID == "" {
			return nil, fail(at+".id", errors.New("commit id is empty"))
		}
		if commitIDs[cm.ID] {
			return nil, fail(at+".id", fmt.Errorf("duplicate commit id %q", cm.ID))
		}
		commitIDs[cm.ID] = true
		if cm.BypassToHuman {
			// A function on a bypass commit would suggest evidence can
			// authorize it; refuse the config rather than ignore it.
			if cm.Fn != nil {
				return nil, fail(at+".precondition_fn", fmt.Errorf("commit %q is bypass_to_human and must not declare a precondition function", cm.ID))
			}
			cc.bypass[cm.ID] = true
			continue
		}
		if cm.Fn == nil {
			return nil, fail(at+".precondition_fn", fmt.Errorf("commit %q declares no precondition function (set bypass_to_human if a person always decides)", cm.ID))
		}
		if cm.Fn.Name == "" {
			return nil, fail(at+".precondition_fn.name", errors.New("function name is empty"))
		}
		if _, dup := cc.fns[cm.Fn.Name]; dup {
			return nil, &CompileError{Case: c.ID, Function: cm.Fn.Name, Field: "name", Err: errors.New("two commits declare this function name; authorize could not tell them apart")}
		}
		f, err := compileFunction(env, c.ID, cm)
		if err != nil {
			return nil, err
		}
		cc.fns[f.name] = f
		cc.fnNames = append(cc.fnNames, f.name)
		cc.info.Functions = append(cc.info.Functions, ladder.GateFunctionInfo{
			PreconditionFn: f.name,
			CommitID:       cm.ID,
			CommitName:     cm.Name,
			SoftCommit:     cm.SoftCommit,
			HasAutoRepair:  len(f.repair) > 0,
			Doc:            cm.Fn.Doc,
			EvidenceSchema: cm.Fn.Evidence,
		})
	}
	for id := range cc.bypass {
		if _, clash := cc.fns[id]; clash {
			return nil, fail("commits", fmt.Errorf("bypass commit id %q is also a function name", id))
		}
	}
	return cc, nil
}

// noEstimates gives the cost estimator no size hints: evidence may be any size.
type noEstimates struct{}

func (noEstimates) EstimateSize(checker.AstNode) *checker.SizeEstimate { return nil }

func (noEstimates) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// exprKind is what an expression must yield.
type exprKind int

const (
	kindNumber exprKind = iota
	kindBool
	kindString
	kindAny
)

func compileFunction(env *cel.Env, caseID string, cm *Commit) (*compiledFn, error) {
	fn := cm.Fn
	fail := func(field, expr string, err error) error {
		return &CompileError{Case: caseID, Function: fn.Name, Field: field, Expr: expr, Err: err}
	}
	compile := func(field, expr string, kind exprKind) (cel.Program, error) {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			return nil, fail(field, expr, iss.Err())
		}
		// Reject what is certainly the wrong type now; dyn results are
		// checked at evaluation and fail closed.
		out := ast.OutputType()
		if k := out.Kind(); k != types.DynKind && k != types.AnyKind {
			ok := true
			switch kind {
			case kindNumber:
				ok = k == types.DoubleKind || k == types.IntKind || k == types.UintKind
			case kindBool:
				ok = k == types.BoolKind
			case kindString:
				ok = k == types.StringKind
			}
			if !ok {
				want := map[exprKind]string{kindNumber: "a number", kindBool: "a bool", kindString: "a string"}[kind]
				return nil, fail(field, expr, fmt.Errorf("expression yields %s, want %s", out, want))
			}
		}
		opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
		// Tracking cost at run time is a tenth of an evaluation; pay it
		// only where the static estimate cannot bound the cost, that is
		// where the expression iterates over or measures evidence.
		if est, err := env.EstimateCost(ast, noEstimates{}); err != nil || est.Max > costLimit {
			opts = append(opts, cel.CostLimit(costLimit))
		}
		prg, err := env.Program(ast, opts...)
		if err != nil {
			return nil, fail(field, expr, err)
		}
		return prg, nil
	}

	f := &compiledFn{name: fn.Name, commitID: cm.ID, commitName: cm.Name, soft: cm.SoftCommit}
	if err := f.compileSchema(fn.Evidence); err != nil {
		var ce *CompileError
		if errors.As(err, &ce) {
			ce.Case, ce.Function = caseID, fn.Name
			return nil, ce
		}
		return nil, fail("evidence", "", err)
	}
	for i, expr := range [4]string{fn.R, fn.C, fn.O, fn.Ro} {
		if expr == "" {
			return nil, fail(dims[i], "", errors.New("score expression is empty"))
		}
		prg, err := compile(dims[i], expr, kindNumber)
		if err != nil {
			return nil, err
		}
		f.scores[i] = prg
	}
	var err error
	verifiable := fn.VerifiableExt
	if verifiable == "" {
		verifiable = "true"
	}
	if f.verifiable, err = compile("verifiable_ext", verifiable, kindBool); err != nil {
		return nil, err
	}
	if fn.Notes != "" {
		if f.notes, err = compile("notes", fn.Notes, kindString); err != nil {
			return nil, err
		}
	}
	if fn.Promise != "" {
		if f.promise, err = compile("promise", fn.Promise, kindBool); err != nil {
			return nil, err
		}
	}
	if fn.Feasibility != "" {
		if f.feasible, err = compile("feasibility", fn.Feasibility, kindBool); err != nil {
			return nil, err
		}
	}
	fields := make([]string, 0, len(fn.Repair))
	for field := range fn.Repair {
		fields = append(fields, field)
	}
	sort.Strings(fields) // a fixed order keeps decisions reproducible
	for _, field := range fields {
		if field == "" {
			return nil, fail("repair", "", errors.New("repair field name is empty"))
		}
		prg, err := compile("repair."+field, fn.Repair[field], kindAny)
		if err != nil {
			return nil, err
		}
		f.repair = append(f.repair, repairField{field: field, prg: prg})
	}
	f.floors = [4]float64{-1, -1, -1, -1}
	for key, floor := range fn.Min {
		i := slices.Index(dims[:], key)
		if i < 0 {
			return nil, fail("min."+key, "", fmt.Errorf("unknown dimension %q (want R, C, O or Ro)", key))
		}
		if !(floor >= 0 && floor <= 1) {
			return nil, fail("min."+key, "", fmt.Errorf("floor %v is outside [0,1]", floor))
		}
		f.floors[i] = floor
	}
	return f, nil
}

// compileSchema checks that the evidence schema documents every property,
// resolves it for validation and records the defaults to fill in.
func (f *compiledFn) compileSchema(schema map[string]any) error {
	fail := func(field string, err error) error {
		return &CompileError{Field: field, Err: err}
	}
	if schema == nil {
		return fail("evidence", errors.New("evidence schema is missing"))
	}
	if t, _ := schema["type"].(string); t != "object" {
		return fail("evidence.type", fmt.Errorf("evidence schema type is %v, want \"object\"", schema["type"]))
	}
	props, _ := schema["properties"].(map[string]any)
	if len(props) == 0 {
		return fail("evidence.properties", errors.New("evidence schema declares no properties; callers would not know what to send"))
	}
	if err := checkDocumented("evidence", schema); err != nil {
		return err
	}
	root, err := toSchema(schema)
	if err != nil {
		return fail("evidence", err)
	}
	if f.schema, err = root.Resolve(nil); err != nil {
		return fail("evidence", err)
	}
	f.flat = compileFlat(schema)
	f.required = root.Required
	if ap := root.AdditionalProperties; ap != nil && ap.Not != nil && isEmptySchema(ap.Not) {
		f.closed = true
	}
	f.props = make(map[string]*jsonschema.Resolved, len(props))
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := props[name].(map[string]any) // checkDocumented made sure
		// A property schema that refers to the root (a $ref to $defs) does
		// not resolve alone; it is then still validated through the root, and
		// only the field name of a failure is lost.
		if ps, err := toSchema(p); err == nil {
			if rs, err := ps.Resolve(nil); err == nil {
				f.props[name] = rs
			}
		}
		if d, ok := p["default"]; ok {
			f.defaults = append(f.defaults, fieldDefault{field: name, value: d})
		} else if hasType(p, "boolean") {
			f.defaults = append(f.defaults, fieldDefault{field: name, value: false})
		}
	}
	return nil
}

// checkDocumented walks the property maps of a schema and requires a type and
// a description on each property, nested ones included.
func checkDocumented(path string, schema map[string]any) error {
	if props, ok := schema["properties"]; ok {
		pm, ok := props.(map[string]any)
		if !ok {
			return &CompileError{Field: path + ".properties", Err: errors.New("properties is not a map")}
		}
		names := make([]string, 0, len(pm))
		for name := range pm {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			at := path + ".properties." + name
			p, ok := pm[name].(map[string]any)
			if !ok {
				return &CompileError{Field: at, Err: errors.New("property schema is not a map")}
			}
			if _, ok := p["type"]; !ok {
				return &CompileError{Field: at + ".type", Err: fmt.Errorf("property %q has no type", name)}
			}
			if d, _ := p["description"].(string); d == "" {
				return &CompileError{Field: at + ".description", Err: fmt.Errorf("property %q has no description", name)}
			}
			if err := checkDocumented(at, p); err != nil {
				return err
			}
		}
	}
	if items, ok := schema["items"].(map[string]any); ok {
		return checkDocumented(path+".items", items)
	}
	return nil
}

// toSchema converts a decoded schema (from YAML or JSON) to a jsonschema.Schema.
func toSchema(m map[string]any) (*jsonschema.Schema, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode schema: %w", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decode schema: %w", err)
	}
	return &s, nil
}

// isEmptySchema reports whether s is {}, which is how jsonschema decodes the
// "not" of additionalProperties: false.
func isEmptySchema(s *jsonschema.Schema) bool {
	return reflect.ValueOf(*s).IsZero()
}

func hasType(p map[string]any, want string) bool {
	switch t := p["type"].(type) {
	case string:
		return t == want
	case []any:
		return slices.Contains(t, any(want))
	}
	return false
}

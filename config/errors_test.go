package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// lines joins YAML lines, so a case's line numbers can be read off its
// position in the list (the first line is line 1).
func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// head is the start of most cases: one workspace, one queue, one step.
// Lines 1–7.
var head = []string{
	"workspaces:",                // 1
	"  - id: ws",                 // 2
	"    queues:",                // 3
	"      - id: q",              // 4
	"        steps:",             // 5
	"          - id: s1",         // 6
	"            name: Step one", // 7
}

func with(extra ...string) string { return lines(append(append([]string{}, head...), extra...)...) }

// parseErrs parses src as t.yaml and returns each fault's message.
func parseErrs(t *testing.T, src string) []string {
	t.Helper()
	_, err := Parse("t.yaml", []byte(src))
	if err == nil {
		return nil
	}
	errs := Errors(err)
	if len(errs) == 0 {
		t.Fatalf("Parse error holds no *Error: %v", err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	// The joined error reads as the faults, one a line.
	if err.Error() != strings.Join(got, "\n") {
		t.Errorf("err.Error() = %q, want the faults one a line", err.Error())
	}
	return got
}

func TestErrors(t *testing.T) {
	const step = "workspaces[0].queues[0].steps[0]"
	tests := []struct {
		name string
		src  string
		want []string
	}{
		// Shape: unknown, duplicate and case-variant keys, wrong types.
		{"unknown field near a known one", with("            lanes: auto"),
			[]string{`t.yaml:8: ` + step + `.lanes: unknown field "lanes"; did you mean "lane"?`}},
		{"unknown field", with("            colour: red"),
			[]string{`t.yaml:8: ` + step + `.colour: unknown field "colour"; expected one of audit_rate, class, description, id, lane, money_moving, name, rules, weekly_volume`}},
		{"case-variant key", with("            Lane: auto"),
			[]string{`t.yaml:8: ` + step + `.Lane: unknown field "Lane"; the field is spelled "lane" (names are case-sensitive)`}},
		{"case-variant top-level key", lines("Workspaces: []"),
			[]string{`t.yaml:1: Workspaces: unknown field "Workspaces"; the field is spelled "workspaces" (names are case-sensitive)`}},
		{"duplicate key", with("            name: Step two"),
			[]string{`t.yaml:8: ` + step + `.name: duplicate key "name"; it is already given at line 7`}},
		{"duplicate key in free-form data", lines(
			"workspaces:",
			"  - id: ws",
			"    capabilities:",
			"      - id: a:b",
			"        title: T",
			"        description: D",
			"        payload_schema:",
			"          type: object",
			"          type: object",
			"        executor: {kind: record}"),
			[]string{`t.yaml:9: workspaces[0].capabilities[0].payload_schema.type: duplicate key "type"; it is already given at line 8`}},
		{"case-variant keys in a map", lines(
			"workspaces:",
			"  - id: ws",
			"    scopes:",
			"      program: [p1]",
			"      Program: [p2]"),
			[]string{`t.yaml:5: workspaces[0].scopes.Program: key "Program" differs from key "program" only in case; JSON readers treat them as one, so use one spelling`}},
		{"bool as string", with("            money_moving: \"yes\""),
			[]string{`t.yaml:8: ` + step + `.money_moving: "yes" is not true or false`}},
		{"number as string", with("            weekly_volume: lots"),
			[]string{`t.yaml:8: ` + step + `.weekly_volume: "lots" is not a whole number`}},
		{"list where a mapping goes", lines("workspaces:", "  - id: ws", "    scopes: [a]"),
			[]string{`t.yaml:3: workspaces[0].scopes: got a list; expected a mapping (key: value lines)`}},
		{"mapping where a list goes", lines("workspaces:", "  - id: ws", "    queues: {id: q}"),
			[]string{`t.yaml:3: workspaces[0].queues: got a mapping; expected a list (- item lines)`}},
		{"non-string key", lines("workspaces:", "  - id: ws", "    scopes:", "      1: [a]"),
			[]string{`t.yaml:4: workspaces[0].scopes: key "1" is not a string; keys are names`}},
		{"empty file", "", []string{`t.yaml: the file is empty; expected a mapping with workspaces`}},
		{"two documents", lines("workspaces: []", "---", "workspaces: []"),
			[]string{`t.yaml:2: the file holds more than one YAML document (---); put everything in one`}},
		{"syntax error", lines("workspaces:", "  - id: ws", "    name: x: y"),
			[]string{`t.yaml:3: mapping values are not allowed in this context`}},
		{"no workspaces", lines("workspaces: []"),
			[]string{`t.yaml:1: workspaces: no workspaces are declared; expected at least one`}},

		// Steps.
		{"bad lane", with("            lane: autp"),
			[]string{`t.yaml:8: ` + step + `.lane: "autp" is not a lane; expected one of human_only, shadow, propose, auto`}},
		{"bad class", with("            class: C"),
			[]string{`t.yaml:8: ` + step + `.class: "C" is not a risk class; expected A (money-moving) or B`}},
		{"money-moving class B", with("            money_moving: true", "            class: B"),
			[]string{`t.yaml:9: ` + step + `.class: a money-moving step is class A; class B would let it act alone on weaker evidence (remove class or money_moving)`}},
		{"audit rate out of range", with("            audit_rate: 0"),
			[]string{`t.yaml:8: ` + step + `.audit_rate: 0 is not a rate; expected a share in (0, 1], e.g. 0.1`}},
		{"weekly volume not positive", with("            weekly_volume: 0"),
			[]string{`t.yaml:8: ` + step + `.weekly_volume: 0 is not a volume; expected a positive number of items per week`}},
		{"rule override out of range", with("            rules:", "              propose_lower: 1.5"),
			[]string{
				// The class B default auto_lower is now below propose_lower
				// too; the override alone is not named, so the rules are.
				`t.yaml:8: ` + step + `.rules: auto_lower: 0.95 is below propose_lower 1.5 (class B defaults apply to the fields not given)`,
				`t.yaml:9: ` + step + `.rules.propose_lower: 1.5 is not between 0 and 1 (class B defaults apply to the fields not given)`,
			}},
		{"rule overrides that contradict", with("            rules:", "              auto_lower: 0.5"),
			[]string{`t.yaml:9: ` + step + `.rules.auto_lower: 0.5 is below propose_lower 0.9 (class B defaults apply to the fields not given)`}},
		{"missing step name", lines("workspaces:", "  - id: ws", "    queues:", "      - id: q", "        steps:", "          - id: s1"),
			[]string{`t.yaml:6: ` + step + `.name: name is missing; expected the plain name people ask by, e.g. "Post to the TMS"`}},

		// Ids.
		{"missing workspace id", lines("workspaces:", "  - name: W"),
			[]string{`t.yaml:2: workspaces[0].id: workspace id is missing; expected a non-empty id`}},
		{"bad step id", lines("workspaces:", "  - id: ws", "    queues:", "      - id: q", "        steps:", "          - id: post tms", "            name: P"),
			[]string{`t.yaml:6: ` + step + `.id: "post tms" is not a valid step id; expected up to 64 letters, digits, '_', '-' or '.', starting with a letter or digit`}},
		{"duplicate workspace id", lines("workspaces:", "  - id: ws", "  - id: ws"),
			[]string{`t.yaml:3: workspaces[1].id: workspace id "ws" is already used by workspaces[0]; workspace ids are unique in the file`}},
		{"duplicate queue id", with("      - id: q"),
			[]string{`t.yaml:8: workspaces[0].queues[1].id: queue id "q" is already used by workspaces[0].queues[0]; queue ids are unique in a workspace`}},
		{"duplicate step id across queues", with("      - id: q2", "        steps:", "          - id: s1", "            name: Other"),
			[]string{`t.yaml:10: workspaces[0].queues[1].steps[0].id: step id "s1" is already used by ` + step + `; step ids are unique in a workspace, so a step can be named without its queue`}},
		{"step names equal but for case and punctuation", with("          - id: s2", "            name: step-one!"),
			[]string{`t.yaml:9: workspaces[0].queues[0].steps[1].name: step name "step-one!" matches the name at ` + step + `; step_evidence finds steps by plain name, so names must differ in more than case and punctuation`}},
		{"scope value of two workspaces", lines(
			"workspaces:",
			"  - id: a",
			"    scopes: {program: [p1]}",
			"  - id: b",
			"    scopes:",
			"      program: [p2, p1]"),
			[]string{`t.yaml:6: workspaces[1].scopes.program[1]: scope value program "p1" already belongs to workspace "a" (workspaces[0].scopes.program[0]); a scope value belongs to one workspace, or WORKSPACE_REFUSED could not be decided`}},

		// Capabilities.
		{"capability id format", capDoc("    - id: readLedger", "      title: T", "      description: D", "      executor: {kind: record}"),
			[]string{`t.yaml:5: workspaces[0].capabilities[0].id: "readLedger" is not a capability id; expected domain:action, e.g. tms:postBill (letters, digits, '_' and '-' on each side of one ':')`}},
		{"capability id duplicate", capDoc("    - id: a:b", "      title: T", "      description: D", "      executor: {kind: record}", "    - id: a:b"),
			[]string{
				`t.yaml:9: workspaces[0].capabilities[1].id: capability id "a:b" is already used by workspaces[0].capabilities[0]; capability ids are unique in a workspace`,
				`t.yaml:9: workspaces[0].capabilities[1].title: title is missing; expected a short human title of the tool`,
				`t.yaml:9: workspaces[0].capabilities[1].description: description is missing; expected what the call does, what to call first and its side effects`,
				`t.yaml:9: workspaces[0].capabilities[1].executor: executor is missing; expected kind http, mcp or record`,
			}},
		{"capability portable name clash", capDoc("    - id: route:item", "      title: T", "      description: D", "      executor: {kind: record}"),
			[]string{`t.yaml:5: workspaces[0].capabilities[0].id: capability id "route:item" has the portable tool name "route_item" of a built-in tool; rename it`}},
		{"capability step missing", capDoc("    - id: a:b", "      title: T", "      description: D", "      step: nope", "      executor: {kind: record}"),
			[]string{`t.yaml:8: workspaces[0].capabilities[0].step: no step "nope" in workspace "ws"; expected a step id or queue/step (declared: s1)`}},
		{"capability step in another queue", capDoc("    - id: a:b", "      title: T", "      description: D", "      step: other/s1", "      executor: {kind: record}"),
			[]string{`t.yaml:8: workspaces[0].capabilities[0].step: no step "other/s1" in workspace "ws"; expected a step id or queue/step (declared: s1)`}},
		{"capability step without item", capDoc("    - id: a:b", "      title: T", "      description: D", "      step: s1", "      executor: {kind: record}"),
			[]string{`t.yaml:5: workspaces[0].capabilities[0].item: item is missing; a capability tied to a step names the payload field that identifies its work item (e.g. item: bill_id), so the route and the audit sample fall on that item and not on a value the agent picks`}},
		{"capability item without step", capDoc("    - id: a:b", "      title: T", "      description: D", "      item: bill_id", "      executor: {kind: record}"),
			[]string{`t.yaml:8: workspaces[0].capabilities[0].item: item only applies to a capability tied to a step; add step or remove item`}},
		{"capability item not in the payload", capDoc("    - id: a:b", "      title: T", "      description: D",
			"      payload_schema: {type: object, properties: {bill: {type: string, description: B.}}}", "      step: s1", "      item: bill_id", "      executor: {kind: record}"),
			[]string{`t.yaml:10: workspaces[0].capabilities[0].item: item "bill_id" names "bill_id", which is not a property of the payload schema (declared: bill); expected a required property that identifies the work item`}},
		{"capability item not required", capDoc("    - id: a:b", "      title: T", "      description: D",
			"      payload_schema: {type: object, properties: {bill_id: {type: string, description: B.}}}", "      step: s1", "      item: bill_id", "      executor: {kind: record}"),
			[]string{`t.yaml:10: workspaces[0].capabilities[0].item: item "bill_id" names "bill_id", which the payload schema does not require; add it to required so every call names its item`}},
		{"capability item pointer through a non-object", capDoc("    - id: a:b", "      title: T", "      description: D",
			"      payload_schema: {type: object, required: [bill], properties: {bill: {type: string, description: B.}}}", "      step: s1", "      item: /bill/id", "      executor: {kind: record}"),
			[]string{`t.yaml:10: workspaces[0].capabilities[0].item: item "/bill/id" goes through "bill", whose type is "string"; expected object`}},
		{"capability item of type number", capDoc("    - id: a:b", "      title: T", "      description: D",
			"      payload_schema: {type: object, required: [n], properties: {n: {type: number, description: N.}}}", "      step: s1", "      item: n", "      executor: {kind: record}"),
			[]string{`t.yaml:10: workspaces[0].capabilities[0].item: item "n" names "n", whose type is "number"; expected string or integer`}},
		{"capability payload property named like a scope", capDoc("    - id: a:b", "      title: T", "      description: D",
			"      payload_schema: {type: object, properties: {Workspace: {type: string, description: W.}}}", "      executor: {kind: record}"),
			[]string{`t.yaml:8: workspaces[0].capabilities[0].payload_schema.properties.Workspace: payload property "Workspace" is named like the scope "workspace"; scope travels only in the scope fields (scope_fields), which are checked against the caller's workspace, so rename the property`}},
		{"capability scope field unknown", capDoc("    - id: a:b", "      title: T", "      description: D", "      scope_fields: [program]", "      executor: {kind: record}"),
			[]string{`t.yaml:8: workspaces[0].capabilities[0].scope_fields[0]: scope field "program" is not among the workspace's scopes (none are declared); every call would be refused`}},
		{"capability gate case unknown", capDoc("    - id: a:b", "      title: T", "      description: D", "      gate: {case: nope, precondition_fn: f}", "      executor: {kind: record}"),
			[]string{`t.yaml:8: workspaces[0].capabilities[0].gate.case: no gate case "nope" in workspace "ws" (none are declared)`}},
		{"capability gate function unknown", gateDoc("      gate: {case: c, precondition_fn: nope}"),
			[]string{`t.yaml:31: workspaces[0].capabilities[0].gate.precondition_fn: case "c" has no precondition function "nope" (declared: f)`}},
		{"capability gate without bind", gateDoc("      gate: {case: c, precondition_fn: f}"),
			[]string{`t.yaml:31: workspaces[0].capabilities[0].gate.bind: bind is missing; a gated capability names which evidence fields must equal which payload fields (e.g. bind: {bill_id: bill_id}), so evidence gathered for one action never authorizes another`}},
		{"capability gate binds an optional evidence field", gateDoc("      gate: {case: c, precondition_fn: f, bind: {ok: bill_id}}"),
			[]string{`t.yaml:31: workspaces[0].capabilities[0].gate.bind.ok: "ok" is not a required property of the precondition function's evidence schema; bind a field every evidence must carry`}},
		{"capability gate names a bypass commit", gateDoc("      gate: {case: c, precondition_fn: person}"),
			[]string{`t.yaml:31: workspaces[0].capabilities[0].gate.precondition_fn: "person" is a bypass_to_human commit, which evidence never authorizes; set human_gate: true instead`}},
		{"executor kind unknown", capDoc("    - id: a:b", "      title: T", "      description: D", "      executor:", "        kind: grpc"),
			[]string{`t.yaml:9: workspaces[0].capabilities[0].executor.kind: "grpc" is not an executor kind; expected one of http, mcp, record`}},
		{"executor url and tool missing", capDoc("    - id: a:b", "      title: T", "      description: D", "      executor:", "        kind: mcp"),
			[]string{
				`t.yaml:8: workspaces[0].capabilities[0].executor.url: url is missing; an mcp executor needs the upstream URL (http://, https:// or demo:NAME)`,
				`t.yaml:8: workspaces[0].capabilities[0].executor.tool: tool is missing; an mcp executor calls one tool of the upstream server`,
			}},
		{"executor url bad", capDoc("    - id: a:b", "      title: T", "      description: D", "      executor:", "        kind: http", "        url: ftp://x/y"),
			[]string{`t.yaml:10: workspaces[0].capabilities[0].executor.url: "ftp://x/y" is not an upstream URL; expected http://host/…, https://host/… or demo:NAME`}},
		{"executor bad duration", capDoc("    - id: a:b", "      title: T", "      description: D", "      executor:", "        kind: http", "        url: http://up/x", "        timeout: 10 seconds"),
			[]string{`t.yaml:11: workspaces[0].capabilities[0].executor.timeout: "10 seconds" is not a duration; expected a Go duration such as 10s, 1500ms, 72h`}},
		{"executor credential header", capDoc("    - id: a:b", "      title: T", "      description: D", "      executor:", "        kind: http", "        url: http://up/x", "        headers:", "          Authorization: Bearer abc", "        headers_from_env:", "          X-Api: not a name"),
			[]string{
				`t.yaml:12: workspaces[0].capabilities[0].executor.headers.Authorization: header "Authorization" looks like a credential; put it in headers_from_env so its value stays out of this file`,
				`t.yaml:14: workspaces[0].capabilities[0].executor.headers_from_env.X-Api: "not a name" is not an environment variable name; expected letters, digits and _`,
			}},
		{"payload schema not documented", capDoc(
			"    - id: a:b",
			"      title: T",
			"      description: D",
			"      payload_schema:",
			"        type: array",
			"        properties:",
			"          amount: {type: number}",
			"          note: {description: why}",
			"      executor: {kind: record}"),
			[]string{
				`t.yaml:9: workspaces[0].capabilities[0].payload_schema.type: the payload schema's type is "array"; expected "object"`,
				`t.yaml:11: workspaces[0].capabilities[0].payload_schema.properties.amount: property "amount" has no description; every property needs a type and a description`,
				`t.yaml:12: workspaces[0].capabilities[0].payload_schema.properties.note: property "note" has no type; every property needs a type and a description`,
			}},

		// Gate cases: compile errors land on the line of the expression.
		{"gate CEL error on one line", gateDocFn(`        R: "evidence.ok ? 1.0 : "`),
			[]string{`t.yaml:20: workspaces[0].gate_cases[0].commits[1].precondition_fn.R: CEL expression does not compile: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER} (at column 21 of the expression)`}},
		{"gate CEL error inside a block", gateDocFn("        R: |", "          evidence.ok ?", "            1.0 : evidenc.x"),
			[]string{`t.yaml:22: workspaces[0].gate_cases[0].commits[1].precondition_fn.R: CEL expression does not compile: undeclared reference to 'evidenc' (in container '') (at column 9 of the expression)`}},
		{"gate CEL wrong type", gateDocFn(`        R: '"high"'`),
			[]string{`t.yaml:20: workspaces[0].gate_cases[0].commits[1].precondition_fn.R: CEL expression does not compile: expression yields string, want a number`}},
		{"gate evidence property undocumented", gateDocEvidence("            ok: {type: boolean}"),
			[]string{`t.yaml:19: workspaces[0].gate_cases[0].commits[1].precondition_fn.evidence.properties.ok.description: property "ok" has no description`}},
		{"gate duplicate case id", lines(
			"workspaces:",
			"  - id: ws",
			"    gate_cases:",
			"      - {id: c, commits: [{id: p, bypass_to_human: true}]}",
			"      - {id: c, commits: [{id: p, bypass_to_human: true}]}"),
			[]string{`t.yaml:5: workspaces[0].gate_cases[1].id: gate case id "c" is already used by workspaces[0].gate_cases[0]; case ids are unique in a workspace`}},

		// Server.
		{"server settings", lines(
			"server:",
			"  listen: localhost",
			"  public_url: ladder.example.com",
			"  approval_ttl: -1h",
			"  audit_secret_env: my secret",
			"  rate_limit: {per_second: 0, burst: 0}",
			"  allowed_origins: [https://a.example/path]",
			"  max_shadow_proposals: 0",
			"  webhook_retention: a week",
			"workspaces: [{id: ws}]"),
			[]string{
				`t.yaml:2: server.listen: "localhost" is not host:port (e.g. 127.0.0.1:8080 or :8080)`,
				`t.yaml:3: server.public_url: "ladder.example.com" is not an http(s) base URL; expected e.g. https://ladder.example.com`,
				`t.yaml:4: server.approval_ttl: "-1h" is not positive; expected a duration above zero`,
				`t.yaml:5: server.audit_secret_env: "my secret" is not an environment variable name; expected letters, digits and _ (the secret itself never goes in this file)`,
				`t.yaml:6: server.rate_limit.per_second: 0 is not a positive number of requests per second`,
				`t.yaml:6: server.rate_limit.burst: 0 is below 1; expected the number of requests a key may send at once`,
				`t.yaml:7: server.allowed_origins[0]: "https://a.example/path" is not an origin; expected scheme://host[:port], e.g. https://console.example.com`,
				`t.yaml:8: server.max_shadow_proposals: 0 is below 1; expected how many unreviewed shadow proposals one key may keep per step`,
				`t.yaml:9: server.webhook_retention: "a week" is not a duration; expected a Go duration such as 10s, 1500ms, 72h`,
			}},

		// Every fault is reported, in line order.
		{"all faults at once", lines(
			"workspaces:",
			"  - id: ws",
			"    queues:",
			"      - id: q",
			"        steps:",
			"          - id: s1",
			"            name: One",
			"            lane: autp",
			"          - id: s1",
			"            name: Two",
			"            class: Z"),
			[]string{
				`t.yaml:8: ` + step + `.lane: "autp" is not a lane; expected one of human_only, shadow, propose, auto`,
				`t.yaml:9: workspaces[0].queues[0].steps[1].id: step id "s1" is already used by ` + step + `; step ids are unique in a workspace, so a step can be named without its queue`,
				`t.yaml:11: workspaces[0].queues[0].steps[1].class: "Z" is not a risk class; expected A (money-moving) or B`,
			}},
		{"all shape faults at once", with("            Name: x", "            lane: [auto]", "            extra: 1"),
			[]string{
				`t.yaml:8: ` + step + `.Name: unknown field "Name"; the field is spelled "name" (names are case-sensitive)`,
				`t.yaml:9: ` + step + `.lane: got a list; expected a string`,
				`t.yaml:10: ` + step + `.extra: unknown field "extra"; expected one of audit_rate, class, description, id, lane, money_moving, name, rules, weekly_volume`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseErrs(t, tt.src)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s\nsource:\n%s", diff, numbered(tt.src))
			}
		})
	}
}

func numbered(src string) string {
	var b strings.Builder
	for i, l := range strings.Split(strings.TrimSuffix(src, "\n"), "\n") {
		b.WriteString(strings.Repeat(" ", 3-len(itoa(i+1))) + itoa(i+1) + "| " + l + "\n")
	}
	return b.String()
}

func itoa(i int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		i /= 10
		if i == 0 {
			return string(b)
		}
	}
}

// capDoc is a workspace with one step s1 and the capability lines given,
// which start at line 5.
func capDoc(capLines ...string) string {
	return lines(append([]string{
		"workspaces:", // 1
		"  - id: ws",  // 2
		"    queues: [{id: q, steps: [{id: s1, name: One}]}]", // 3
		"    capabilities:", // 4
	}, capLines...)...)
}

// gateLines is a workspace with gate case c: function f on commit fc (its R
// on line 20, evidence properties from line 19) and bypass commit person
// (commits[0]). Lines 1–23.
func gateLines(r []string, props []string) []string {
	ls := []string{
		"workspaces:",                       // 1
		"  - id: ws",                        // 2
		"    gate_cases:",                   // 3
		"      - id: c",                     // 4
		"        name: C",                   // 5
		"        description: D",            // 6
		"        commits:",                  // 7
		"          - id: person",            // 8
		"            name: P",               // 9
		"            bypass_to_human: true", // 10
		"          - id: fc",                // 11
		"            name: F",               // 12
		"            precondition_fn:",      // 13
		"              name: f",             // 14
		"              doc: d",              // 15
		"              evidence:",           // 16
		"                type: object",      // 17
		"                properties:",       // 18
	}
	for _, p := range props {
		ls = append(ls, "      "+p)
	}
	for _, l := range r {
		ls = append(ls, "      "+l)
	}
	return append(ls,
		"              C: '1.0'",
		"              O: '1.0'",
		"              Ro: '1.0'",
	)
}

var okProp = []string{"            ok: {type: boolean, description: Done.}"}
var okR = []string{"        R: 'evidence.ok ? 1.0 : 0.0'"}

func gateDoc(gateLine string) string {
	ls := gateLines(okR, okProp)
	// Lines 24–30; the gate line is 31.
	ls = append(ls,
		"    capabilities:",
		"      - id: a:b",
		"        title: T",
		"        description: D",
		"        executor: {kind: record}",
		"        step: ''",
		"        served: true",
		"  "+gateLine,
	)
	return lines(ls...)
}

func gateDocFn(r ...string) string           { return lines(gateLines(r, okProp)...) }
func gateDocEvidence(props ...string) string { return lines(gateLines(okR, props)...) }

package ladder

import (
	"strings"
)

// Surface is where a person or an agent reads a refusal: each names the
// same operation its own way (a tool on MCP, an endpoint on REST, a command
// on the CLI, a page in the console).
type Surface uint8

// The surfaces a refusal is rendered for.
const (
	SurfaceREST Surface = iota
	SurfaceMCP
	SurfaceCLI
	SurfaceConsole
)

// String is the surface's name as a request header or a log names it.
func (s Surface) String() string {
	switch s {
	case SurfaceMCP:
		return "mcp"
	case SurfaceCLI:
		return "cli"
	case SurfaceConsole:
		return "console"
	}
	return "rest"
}

// ParseSurface reads a surface's name; anything else is REST.
func ParseSurface(name string) Surface {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "mcp":
		return SurfaceMCP
	case "cli":
		return SurfaceCLI
	case "console":
		return SurfaceConsole
	}
	return SurfaceREST
}

// SurfaceHeader is the request header a client sets to have refusals
// rendered for the surface its user reads (the CLI sends "cli" over REST).
const SurfaceHeader = "Ladder-Surface"

// opNames is each operation's name on each surface, indexed by Surface.
// Messages and hints name an operation as {{op}}, or {{op ARG}} where the
// name carries an id; Render puts in the reader's name. The one table
// keeps every surface's words for an operation together, so a hint is
// written once and read in the reader's terms.
func opNames(op, arg string) ([4]string, bool) {
	switch op {
	case "steps":
		return [4]string{"GET /v1/steps", "which_steps_run_alone", "ladder steps", "the Steps page"}, true
	case "evidence":
		return [4]string{"GET /v1/steps/{queue}/{step}/evidence", "step_evidence", "ladder evidence STEP", "the step's page"}, true
	case "route":
		return [4]string{"POST /v1/route", "route_item", "ladder route", "the agent's route call"}, true
	case "review":
		return [4]string{"POST /v1/routes/{route_id}/review", "the review endpoint (POST /v1/routes/{route_id}/review)", "ladder review", "the inbox"}, true
	case "adjudicate":
		return [4]string{`send "adjudication": true`, `send "adjudication": true`, "pass --adjudication", "tick Adjudication"}, true
	case "approval_status":
		return [4]string{"GET /v1/approvals/{id}", "approval_status", "ladder approvals list", "the inbox"}, true
	case "approval_retry":
		return [4]string{"POST /v1/approvals/" + arg + "/retry", "a person's retry of " + arg + " (console, ladder approvals retry or POST /v1/approvals/" + arg + "/retry)", "ladder approvals retry " + arg, "the approval's Retry button"}, true
	case "capabilities":
		return [4]string{"GET /v1/capabilities", "tools/list", "the config's capabilities (docs/reference.md lists them)", "the config's capabilities"}, true
	case "payload_schema":
		return [4]string{"the capability's payload_schema (GET /v1/capabilities)", "the tool's input schema", "the capability's payload schema (docs/reference.md)", "the capability's payload schema"}, true
	case "gate_functions":
		return [4]string{"GET /v1/gate/functions", "list_precondition_functions", "ladder gate functions", "GET /v1/gate/functions"}, true
	case "gate_history":
		return [4]string{"GET /v1/gate/history", "gate_history_get", "ladder gate history", "Gate history"}, true
	case "authorize":
		return [4]string{"POST /v1/gate/authorize", "authorize", "ladder gate authorize", "authorize"}, true
	case "keys_list":
		return [4]string{"GET /v1/keys", "GET /v1/keys", "ladder keys list", "ladder keys list"}, true
	case "keys_create":
		return [4]string{"POST /v1/keys", "ladder keys create", "ladder keys create", "ladder keys create"}, true
	}
	return [4]string{}, false
}

// RenderText puts s's names for the operations text names as {{op}} or
// {{op ARG}}. A token naming no operation stays as it is (a test walks
// every token in the code, so none does).
func RenderText(text string, s Surface) string {
	if !strings.Contains(text, "{{") {
		return text
	}
	var b strings.Builder
	for {
		i := strings.Index(text, "{{")
		if i < 0 {
			break
		}
		j := strings.Index(text[i:], "}}")
		if j < 0 {
			break
		}
		op, arg, _ := strings.Cut(text[i+2:i+j], " ")
		names, ok := opNames(op, arg)
		b.WriteString(text[:i])
		if ok {
			b.WriteString(names[s])
		} else {
			b.WriteString(text[i : i+j+2])
		}
		text = text[i+j+2:]
	}
	b.WriteString(text)
	return b.String()
}

// OpName is op's name on s (with arg where the name carries an id), or ""
// for an operation the table does not hold.
func OpName(op, arg string, s Surface) string {
	names, _ := opNames(op, arg)
	return names[s]
}

// OpTokens are the operations RenderText knows, for tests that check each
// token in the code names one.
func OpTokens() []string {
	return []string{"steps", "evidence", "route", "review", "adjudicate", "approval_status", "approval_retry", "capabilities", "payload_schema", "gate_functions", "gate_history", "authorize", "keys_list", "keys_create"}
}

// Render is e as s's reader reads it: its message and hint name the
// operations in s's terms. e is not changed.
func (e *Error) Render(s Surface) *Error {
	out := *e
	out.Message = RenderText(e.Message, s)
	out.Hint = RenderText(e.Hint, s)
	return &out
}

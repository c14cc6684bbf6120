package gate

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinels for errors.Is; the concrete error is a *LookupError carrying the
// valid names and a hint.
var (
	// ErrUnknownCase: no case has the given id.
	ErrUnknownCase = errors.New("unknown gate case")
	// ErrUnknownFunction: the case has no authorizable function of that name.
	ErrUnknownFunction = errors.New("unknown precondition function")
	// ErrBypassToHuman: the name is a bypass_to_human commit, which evidence
	// alone never authorizes.
	ErrBypassToHuman = errors.New("commit needs human judgment")
)

// LookupError reports an authorize call naming something the gate will not
// decide. It unwraps to ErrUnknownCase, ErrUnknownFunction or
// ErrBypassToHuman, and carries what the caller may use instead so an agent
// can recover without another round trip.
type LookupError struct {
	// Err is the sentinel.
	Err error
	// Case is the case id asked for.
	Case string
	// Name is the case id, function name or commit id that was refused.
	Name string
	// Valid lists the names that would have been accepted (case ids for
	// ErrUnknownCase, function names otherwise), in declaration order.
	Valid []string
	// Hint says what to do next.
	Hint string
}

func (e *LookupError) Error() string {
	switch e.Err {
	case ErrUnknownCase:
		return fmt.Sprintf("%v %q (valid: %s)", e.Err, e.Name, strings.Join(e.Valid, ", "))
	case ErrBypassToHuman:
		return fmt.Sprintf("%v: commit %q of case %q is bypass_to_human", e.Err, e.Name, e.Case)
	}
	return fmt.Sprintf("%v %q in case %q (valid: %s)", e.Err, e.Name, e.Case, strings.Join(e.Valid, ", "))
}

// Unwrap returns the sentinel.
func (e *LookupError) Unwrap() error { return e.Err }

// EvidenceError reports evidence that does not match the function's schema.
// The caller can fix it, so it names the field.
type EvidenceError struct {
	// Field is the top-level evidence field at fault, or "" when the fault
	// is not tied to one field.
	Field string
	// Problem says what is wrong with it.
	Problem string
}

func (e *EvidenceError) Error() string {
	if e.Field == "" {
		return "evidence: " + e.Problem
	}
	return fmt.Sprintf("evidence field %q: %s", e.Field, e.Problem)
}

// CompileError reports a case that cannot be compiled. Case, Function and
// Field locate the fault so the config package can map it to file:line;
// Field is the YAML key path inside the function (e.g. "R",
// "repair.paying_contracts_verified", "evidence.properties.x"), or inside the
// case when Function is empty.
type CompileError struct {
	Case     string
	Function string
	Field    string
	// Expr is the CEL expression at fault, if any.
	Expr string
	Err  error
}

func (e *CompileError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "case %q", e.Case)
	if e.Function != "" {
		fmt.Fprintf(&b, " function %q", e.Function)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, " %s", e.Field)
	}
	if e.Expr != "" {
		fmt.Fprintf(&b, " (%s)", e.Expr)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

// Unwrap returns the underlying error.
func (e *CompileError) Unwrap() error { return e.Err }

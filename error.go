package ladder

import (
	"errors"
	"fmt"
	"sort"
)

// Code is a refusal name. The REST API, the MCP surface and the CLI return
// the same names (seed 004): an agent or a script can branch on them.
type Code string

// The refusal names.
const (
	CodeKeyMissing          Code = "KEY_MISSING"
	CodeKeyInvalid          Code = "KEY_INVALID"
	CodeHumanKeyRefused     Code = "HUMAN_KEY_REFUSED"
	CodeAgentKeyRefused     Code = "AGENT_KEY_REFUSED"
	CodeKeyKindRefused      Code = "KEY_KIND_REFUSED"
	CodeTokenUnmapped       Code = "TOKEN_UNMAPPED"
	CodeScopeMissing        Code = "SCOPE_MISSING"
	CodeWorkspaceRefused    Code = "WORKSPACE_REFUSED"
	CodeUnknownCapability   Code = "UNKNOWN_CAPABILITY"
	CodeCapabilityNotServed Code = "CAPABILITY_NOT_SERVED"
	CodeStepNotFound        Code = "STEP_NOT_FOUND"
	CodeRouteNotFound       Code = "ROUTE_NOT_FOUND"
	CodeApprovalNotFound    Code = "APPROVAL_NOT_FOUND"
	CodeNotFound            Code = "NOT_FOUND"
	CodeMethodNotAllowed    Code = "METHOD_NOT_ALLOWED"
	CodeInvalidArgument     Code = "INVALID_ARGUMENT"
	CodeInvalidJSON         Code = "INVALID_JSON"
	CodeBadCursor           Code = "BAD_CURSOR"
	CodeBodyTooLarge        Code = "BODY_TOO_LARGE"
	CodeBodyTimeout         Code = "BODY_TIMEOUT"
	CodeUnsupportedMedia    Code = "UNSUPPORTED_MEDIA_TYPE"
	CodeConflict            Code = "CONFLICT"
	CodeIdempotencyKeyUsed  Code = "IDEMPOTENCY_KEY_REUSED"
	CodeAlreadyReviewed     Code = "ALREADY_REVIEWED"
	CodeApprovalClosed      Code = "APPROVAL_CLOSED"
	CodeApprovalExpired     Code = "APPROVAL_EXPIRED"
	CodeStepNeedsPerson     Code = "STEP_NEEDS_PERSON"
	CodeGateHeld            Code = "GATE_HELD"
	CodeUnknownCase         Code = "UNKNOWN_CASE"
	CodeUnknownFunction     Code = "UNKNOWN_FUNCTION"
	CodeBypassToHuman       Code = "BYPASS_TO_HUMAN"
	CodeEvidenceInvalid     Code = "EVIDENCE_INVALID"
	CodeRateLimited         Code = "RATE_LIMITED"
	CodeOverloaded          Code = "OVERLOADED"
	CodeOriginRefused       Code = "ORIGIN_REFUSED"
	CodeUnsupportedProtocol Code = "UNSUPPORTED_PROTOCOL_VERSION"
	CodeAuditUnavailable    Code = "AUDIT_UNAVAILABLE"
	CodeUpstreamTimeout     Code = "UPSTREAM_TIMEOUT"
	CodeUpstreamFailed      Code = "UPSTREAM_FAILED"
	CodeOutcomeUnknown      Code = "OUTCOME_UNKNOWN"
	CodeServerUnreachable   Code = "SERVER_UNREACHABLE"
	CodeInternal            Code = "INTERNAL"
)

// JSON-RPC error codes of the MCP surface (seed 004). The 2026-07-28 MCP
// spec calls -32000..-32019 legacy; the seed contract keeps them. Which
// refusal answers with which is package mcp's table (mcp.RPCCode); the
// numbers are here because the client reads them too.
const (
	RPCAuthFailed    = -32001 // authentication failure
	RPCRefused       = -32000 // any other refusal
	RPCInvalidParams = -32602 // unknown capability, unknown tool, bad cursor
	RPCParseError    = -32700
	RPCInternal      = -32603
	// RPCUnsupportedProtocolVersion is the MCP 2026-07-28 code for a
	// protocol version the server does not speak (SEP-2575); clients read
	// data.supported from it to pick another.
	RPCUnsupportedProtocolVersion = -32022
)

// CodeInfo is one row of the refusal table: a name and a one-line meaning
// for the reference. How each surface answers a refusal is the surface's
// table: the HTTP status in package http, the JSON-RPC code in package mcp
// (each with a test that every name here has a row).
type CodeInfo struct {
	Code    Code
	Meaning string
}

// codeTable is the one list of refusal names every surface reads.
var codeTable = []CodeInfo{
	{CodeKeyMissing, "no bearer key was sent"},
	{CodeKeyInvalid, "the key is unknown, revoked or expired"},
	{CodeHumanKeyRefused, "a human key was used on the agent surface"},
	{CodeAgentKeyRefused, "an agent key was used where a person must act"},
	{CodeKeyKindRefused, "this key's kind may not do this"},
	{CodeTokenUnmapped, "a valid access token from a trusted issuer matches no identity mapping rule, or rules naming different workspaces or kinds"},
	{CodeScopeMissing, "a valid access token lacks a scope the issuer's config requires"},
	{CodeWorkspaceRefused, "the object or scope is not this key's workspace"},
	{CodeUnknownCapability, "no capability or tool of that name in this workspace"},
	{CodeCapabilityNotServed, "the capability is declared but not served yet"},
	{CodeStepNotFound, "no step of that id or name in this workspace"},
	{CodeRouteNotFound, "no route of that id in this workspace"},
	{CodeApprovalNotFound, "no approval of that id in this workspace"},
	{CodeNotFound, "no such object in this workspace"},
	{CodeMethodNotAllowed, "the endpoint exists but not for this HTTP method; the Allow header lists those it answers"},
	{CodeInvalidArgument, "a field is missing or has the wrong value"},
	{CodeInvalidJSON, "the body is not valid strict JSON"},
	{CodeBadCursor, "the page cursor is not one this server issued"},
	{CodeBodyTooLarge, "the body is over 1 MiB"},
	{CodeBodyTimeout, "the body did not arrive within the body timeout (10 s by default); nothing was done"},
	{CodeUnsupportedMedia, "the body's Content-Type is not JSON; send Content-Type: application/json"},
	{CodeConflict, "the object changed; reload and try again"},
	{CodeIdempotencyKeyUsed, "the idempotency_key was used before with another payload or scope"},
	{CodeAlreadyReviewed, "the route was reviewed already; mark an adjudication to override"},
	{CodeApprovalClosed, "the approval was decided already"},
	{CodeApprovalExpired, "the approval expired before a person decided"},
	{CodeStepNeedsPerson, "the step's lane leaves this work to a person"},
	{CodeGateHeld, "the evidence gate did not return PASS"},
	{CodeUnknownCase, "no gate case of that id"},
	{CodeUnknownFunction, "no precondition function of that name in the case"},
	{CodeBypassToHuman, "a person must decide this commit; evidence cannot authorize it"},
	{CodeEvidenceInvalid, "the evidence does not match the function's schema"},
	{CodeRateLimited, "too many requests for this key, or too many at once for this key or (without a key) this address; retry after the given time"},
	{CodeOverloaded, "the server is at its concurrency cap; retry shortly"},
	{CodeOriginRefused, "the Origin header is not allowed"},
	{CodeUnsupportedProtocol, "the MCP-Protocol-Version header names a version this server does not speak; data.supported lists those it does"},
	{CodeAuditUnavailable, "the audit log cannot be written, so nothing runs"},
	{CodeUpstreamTimeout, "the upstream did not answer in time"},
	{CodeUpstreamFailed, "the upstream answered with a failure"},
	{CodeOutcomeUnknown, "the call with this idempotency_key began, but the server running it stopped before its result was stored: it may or may not have run upstream, and ladder will not run it again under this key; check the upstream system"},
	{CodeServerUnreachable, "a client (the CLI, the Go client, the gateway) could not connect to the ladder server at the URL it was given; no server sends it"},
	{CodeInternal, "an internal error; the log has details"},
}

// Codes returns the refusal table sorted by name.
func Codes() []CodeInfo {
	out := append([]CodeInfo(nil), codeTable...)
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// Info returns the table row of c; an unknown code has no meaning.
func (c Code) Info() CodeInfo {
	for _, r := range codeTable {
		if r.Code == c {
			return r
		}
	}
	return CodeInfo{Code: c}
}

// Error is a refusal every surface can render: a name from the table above,
// a sentence for a person, and a hint saying what to do next (which tool to
// call, which field to fix).
type Error struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Hint    string         `json:"hint,omitempty"`
	Data    map[string]any `json:"data,omitempty"` // extra machine-readable detail, e.g. a gate verdict
	// RPCCode, when not 0, is the JSON-RPC code the MCP surface answers
	// with instead of the code's row: a malformed envelope is -32600
	// (Invalid Request) although its name is INVALID_ARGUMENT.
	RPCCode int   `json:"-"`
	Err     error `json:"-"` // the cause, for logs only
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with a formatted message.
//
// format must make a sentence (a capital letter first, a full stop last).
func Errorf(code Code, hint string, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Hint: hint}
}

// The constructors below take message as a sentence: a capital letter
// first, a full stop last (a test walks every call).

// InvalidField refuses a request for the value of one field:
// INVALID_ARGUMENT with data.field naming it, so a client can point at the
// field. message is the sentence saying what is wrong with the value.
func InvalidField(field, message, hint string) *Error {
	return &Error{Code: CodeInvalidArgument, Message: message, Hint: hint, Data: map[string]any{"field": field}}
}

// NotFound refuses a request for an object the caller's workspace does not
// hold. code is the not-found name of the object's kind (STEP_NOT_FOUND,
// ROUTE_NOT_FOUND, APPROVAL_NOT_FOUND, or NOT_FOUND); message names what
// was looked for.
func NotFound(code Code, message, hint string) *Error {
	return &Error{Code: code, Message: message, Hint: hint}
}

// Refused is any other refusal: a name from the table, the sentence saying
// what was refused and why, and the hint saying what to do next.
func Refused(code Code, message, hint string) *Error {
	return &Error{Code: code, Message: message, Hint: hint}
}

// ErrorCode returns the code of err when it is (or wraps) an *Error, and
// INTERNAL otherwise.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// AsError returns err as an *Error, wrapping an unknown error as INTERNAL so
// nothing internal leaks into a response.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: "An internal error stopped this request.", Hint: "retry; if it persists, tell the operator (the server log has details)", Err: err}
}

// Store-level sentinel errors. Implementations wrap these so services can
// turn them into refusals.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	// ErrLaneChanged means a write was decided under a lane epoch that is no
	// longer the step's: the lane in force at commit decides, so the caller
	// decides again from the current state. Nothing was written.
	ErrLaneChanged = errors.New("the step's lane changed")
	// ErrAuditRateChanged means a route was decided under an audit rate that
	// is no longer the step's, its lane epoch unchanged: the rate in force
	// at commit decides the sampling, so the caller decides again from the
	// current state. Nothing was written.
	ErrAuditRateChanged = errors.New("the step's audit rate changed")
	// ErrUnavailable means the store could not durably write; callers refuse
	// with AUDIT_UNAVAILABLE and execute nothing.
	ErrUnavailable = errors.New("store unavailable")
	// ErrExpired means a decision on an approval lost to its deadline, by
	// the store's clock: the approval is stored as expired and nothing may
	// run. It wraps ErrConflict (the compare-and-set from pending failed).
	ErrExpired = fmt.Errorf("approval expired: %w", ErrConflict)
	// ErrTooManyPending means CreateApproval stored nothing: the requesting
	// key has Approval.MaxPending approvals pending already.
	ErrTooManyPending = errors.New("too many pending approvals")
	// ErrTooManyShadow means CreateApproval stored nothing: the requesting
	// key has Approval.MaxShadow unreviewed shadow records of the step
	// already.
	ErrTooManyShadow = errors.New("too many unreviewed shadow proposals")
	// ErrRouteReviewed means CreateApproval stored nothing: the capped
	// shadow record's route was reviewed already.
	ErrRouteReviewed = errors.New("the route was reviewed already")
	// ErrKeyInactive means a write made under RequireActiveKey found its
	// key revoked, expired or gone at commit: nothing was written, and the
	// caller is refused as with an invalid key.
	ErrKeyInactive = errors.New("the key is not active at commit")
)

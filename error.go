package ladder

import (
	"errors"
	"fmt"
	"net/http"
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
	CodeWorkspaceRefused    Code = "WORKSPACE_REFUSED"
	CodeUnknownCapability   Code = "UNKNOWN_CAPABILITY"
	CodeCapabilityNotServed Code = "CAPABILITY_NOT_SERVED"
	CodeStepNotFound        Code = "STEP_NOT_FOUND"
	CodeRouteNotFound       Code = "ROUTE_NOT_FOUND"
	CodeApprovalNotFound    Code = "APPROVAL_NOT_FOUND"
	CodeNotFound            Code = "NOT_FOUND"
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
	CodeInternal            Code = "INTERNAL"
)

// JSON-RPC error codes of the MCP surface (seed 004). The 2026-07-28 MCP
// spec calls -32000..-32019 legacy; the seed contract keeps them.
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

// CodeInfo is one row of the table that maps a refusal name to its HTTP
// status and JSON-RPC code, with a one-line meaning for the reference.
type CodeInfo struct {
	Code       Code
	HTTPStatus int
	RPCCode    int
	Meaning    string
}

// codeTable is the one table every surface reads.
var codeTable = []CodeInfo{
	{CodeKeyMissing, http.StatusUnauthorized, RPCAuthFailed, "no bearer key was sent"},
	{CodeKeyInvalid, http.StatusUnauthorized, RPCAuthFailed, "the key is unknown, revoked or expired"},
	{CodeHumanKeyRefused, http.StatusForbidden, RPCRefused, "a human key was used on the agent surface"},
	{CodeAgentKeyRefused, http.StatusForbidden, RPCRefused, "an agent key was used where a person must act"},
	{CodeKeyKindRefused, http.StatusForbidden, RPCRefused, "this key's kind may not do this"},
	{CodeWorkspaceRefused, http.StatusForbidden, RPCRefused, "the object or scope is not this key's workspace"},
	{CodeUnknownCapability, http.StatusNotFound, RPCInvalidParams, "no capability or tool of that name in this workspace"},
	{CodeCapabilityNotServed, http.StatusNotFound, RPCInvalidParams, "the capability is declared but not served yet"},
	{CodeStepNotFound, http.StatusNotFound, RPCInvalidParams, "no step of that id or name in this workspace"},
	{CodeRouteNotFound, http.StatusNotFound, RPCInvalidParams, "no route of that id in this workspace"},
	{CodeApprovalNotFound, http.StatusNotFound, RPCInvalidParams, "no approval of that id in this workspace"},
	{CodeNotFound, http.StatusNotFound, RPCInvalidParams, "no such object in this workspace"},
	{CodeInvalidArgument, http.StatusBadRequest, RPCInvalidParams, "a field is missing or has the wrong value"},
	{CodeInvalidJSON, http.StatusBadRequest, RPCParseError, "the body is not valid strict JSON"},
	{CodeBadCursor, http.StatusBadRequest, RPCInvalidParams, "the page cursor is not one this server issued"},
	{CodeBodyTooLarge, http.StatusRequestEntityTooLarge, RPCRefused, "the body is over 1 MiB"},
	{CodeBodyTimeout, http.StatusRequestTimeout, RPCRefused, "the body did not arrive within the body timeout (10 s by default); nothing was done"},
	{CodeUnsupportedMedia, http.StatusUnsupportedMediaType, RPCRefused, "the body's Content-Type is not JSON; send Content-Type: application/json"},
	{CodeConflict, http.StatusConflict, RPCRefused, "the object changed; reload and try again"},
	{CodeIdempotencyKeyUsed, http.StatusConflict, RPCInvalidParams, "the idempotency_key was used before with another payload or scope"},
	{CodeAlreadyReviewed, http.StatusConflict, RPCRefused, "the route was reviewed already; mark an adjudication to override"},
	{CodeApprovalClosed, http.StatusConflict, RPCRefused, "the approval was decided already"},
	{CodeApprovalExpired, http.StatusGone, RPCRefused, "the approval expired before a person decided"},
	{CodeStepNeedsPerson, http.StatusForbidden, RPCRefused, "the step's lane leaves this work to a person"},
	{CodeGateHeld, http.StatusForbidden, RPCRefused, "the evidence gate did not return PASS"},
	{CodeUnknownCase, http.StatusNotFound, RPCInvalidParams, "no gate case of that id"},
	{CodeUnknownFunction, http.StatusNotFound, RPCInvalidParams, "no precondition function of that name in the case"},
	{CodeBypassToHuman, http.StatusForbidden, RPCRefused, "a person must decide this commit; evidence cannot authorize it"},
	{CodeEvidenceInvalid, http.StatusBadRequest, RPCInvalidParams, "the evidence does not match the function's schema"},
	{CodeRateLimited, http.StatusTooManyRequests, RPCRefused, "too many requests for this key, or too many at once for this key or (without a key) this address; retry after the given time"},
	{CodeOverloaded, http.StatusServiceUnavailable, RPCRefused, "the server is at its concurrency cap; retry shortly"},
	{CodeOriginRefused, http.StatusForbidden, RPCRefused, "the Origin header is not allowed"},
	{CodeUnsupportedProtocol, http.StatusBadRequest, RPCUnsupportedProtocolVersion, "the MCP-Protocol-Version header names a version this server does not speak; data.supported lists those it does"},
	{CodeAuditUnavailable, http.StatusServiceUnavailable, RPCRefused, "the audit log cannot be written, so nothing runs"},
	{CodeUpstreamTimeout, http.StatusGatewayTimeout, RPCRefused, "the upstream did not answer in time"},
	{CodeUpstreamFailed, http.StatusBadGateway, RPCRefused, "the upstream answered with a failure"},
	{CodeOutcomeUnknown, http.StatusConflict, RPCRefused, "the call with this idempotency_key began, but the server running it stopped before its result was stored: it may or may not have run upstream, and ladder will not run it again under this key; check the upstream system"},
	{CodeInternal, http.StatusInternalServerError, RPCInternal, "an internal error; the log has details"},
}

// Codes returns the refusal table sorted by name.
func Codes() []CodeInfo {
	out := append([]CodeInfo(nil), codeTable...)
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// Info returns the table row of c; unknown codes map to INTERNAL's row.
func (c Code) Info() CodeInfo {
	for _, r := range codeTable {
		if r.Code == c {
			return r
		}
	}
	return CodeInfo{Code: c, HTTPStatus: http.StatusInternalServerError, RPCCode: RPCInternal}
}

// Error is a refusal every surface can render: a name from the table above,
// a sentence for a person, and a hint saying what to do next (which tool to
// call, which field to fix).
type Error struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Hint    string         `json:"hint,omitempty"`
	Data    map[string]any `json:"data,omitempty"` // extra machine-readable detail, e.g. a gate verdict
	Err     error          `json:"-"`              // the cause, for logs only
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
func Errorf(code Code, hint string, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Hint: hint}
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
	return &Error{Code: CodeInternal, Message: "internal error", Hint: "retry; if it persists, tell the operator (the server log has details)", Err: err}
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
)

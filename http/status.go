package http

import (
	"net/http"

	"github.com/ladderhq/ladder"
)

// statusOf is the HTTP status of each refusal name on the REST API and the
// console; the names and their meanings are the root package's
// (ladder.Codes), and a test keeps the two lists in step.
var statusOf = map[ladder.Code]int{
	ladder.CodeKeyMissing:          http.StatusUnauthorized,
	ladder.CodeKeyInvalid:          http.StatusUnauthorized,
	ladder.CodeHumanKeyRefused:     http.StatusForbidden,
	ladder.CodeAgentKeyRefused:     http.StatusForbidden,
	ladder.CodeKeyKindRefused:      http.StatusForbidden,
	ladder.CodeTokenUnmapped:       http.StatusForbidden,
	ladder.CodeScopeMissing:        http.StatusForbidden,
	ladder.CodeWorkspaceRefused:    http.StatusForbidden,
	ladder.CodeUnknownCapability:   http.StatusNotFound,
	ladder.CodeCapabilityNotServed: http.StatusNotFound,
	ladder.CodeStepNotFound:        http.StatusNotFound,
	ladder.CodeRouteNotFound:       http.StatusNotFound,
	ladder.CodeApprovalNotFound:    http.StatusNotFound,
	ladder.CodeNotFound:            http.StatusNotFound,
	ladder.CodeInvalidArgument:     http.StatusBadRequest,
	ladder.CodeInvalidJSON:         http.StatusBadRequest,
	ladder.CodeBadCursor:           http.StatusBadRequest,
	ladder.CodeBodyTooLarge:        http.StatusRequestEntityTooLarge,
	ladder.CodeBodyTimeout:         http.StatusRequestTimeout,
	ladder.CodeUnsupportedMedia:    http.StatusUnsupportedMediaType,
	ladder.CodeConflict:            http.StatusConflict,
	ladder.CodeIdempotencyKeyUsed:  http.StatusConflict,
	ladder.CodeAlreadyReviewed:     http.StatusConflict,
	ladder.CodeApprovalClosed:      http.StatusConflict,
	ladder.CodeApprovalExpired:     http.StatusGone,
	ladder.CodeStepNeedsPerson:     http.StatusForbidden,
	ladder.CodeGateHeld:            http.StatusForbidden,
	ladder.CodeUnknownCase:         http.StatusNotFound,
	ladder.CodeUnknownFunction:     http.StatusNotFound,
	ladder.CodeBypassToHuman:       http.StatusForbidden,
	ladder.CodeEvidenceInvalid:     http.StatusBadRequest,
	ladder.CodeRateLimited:         http.StatusTooManyRequests,
	ladder.CodeOverloaded:          http.StatusServiceUnavailable,
	ladder.CodeOriginRefused:       http.StatusForbidden,
	ladder.CodeUnsupportedProtocol: http.StatusBadRequest,
	ladder.CodeAuditUnavailable:    http.StatusServiceUnavailable,
	ladder.CodeUpstreamTimeout:     http.StatusGatewayTimeout,
	ladder.CodeUpstreamFailed:      http.StatusBadGateway,
	ladder.CodeOutcomeUnknown:      http.StatusConflict,
	// Only clients name it (no connection was made); a relay that passes
	// it on answers as a gateway that cannot reach its server.
	ladder.CodeServerUnreachable: http.StatusBadGateway,
	ladder.CodeMethodNotAllowed:  http.StatusMethodNotAllowed,
	ladder.CodeInternal:          http.StatusInternalServerError,
}

// Status returns the HTTP status that answers a refusal of code c; a code
// without a row is answered as INTERNAL is.
func Status(c ladder.Code) int {
	if s, ok := statusOf[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

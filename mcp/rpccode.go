package mcp

import "github.com/ladderhq/ladder"

// rpcCodeOf is the JSON-RPC error code of each refusal name on the MCP
// surface (seed 004); the names and their meanings are the root package's
// (ladder.Codes), and a test keeps the two lists in step.
var rpcCodeOf = map[ladder.Code]int{
	ladder.CodeKeyMissing:          ladder.RPCAuthFailed,
	ladder.CodeKeyInvalid:          ladder.RPCAuthFailed,
	ladder.CodeHumanKeyRefused:     ladder.RPCRefused,
	ladder.CodeAgentKeyRefused:     ladder.RPCRefused,
	ladder.CodeKeyKindRefused:      ladder.RPCRefused,
	ladder.CodeTokenUnmapped:       ladder.RPCRefused,
	ladder.CodeScopeMissing:        ladder.RPCRefused,
	ladder.CodeWorkspaceRefused:    ladder.RPCRefused,
	ladder.CodeUnknownCapability:   ladder.RPCInvalidParams,
	ladder.CodeCapabilityNotServed: ladder.RPCInvalidParams,
	ladder.CodeStepNotFound:        ladder.RPCInvalidParams,
	ladder.CodeRouteNotFound:       ladder.RPCInvalidParams,
	ladder.CodeApprovalNotFound:    ladder.RPCInvalidParams,
	ladder.CodeNotFound:            ladder.RPCInvalidParams,
	ladder.CodeInvalidArgument:     ladder.RPCInvalidParams,
	ladder.CodeInvalidJSON:         ladder.RPCParseError,
	ladder.CodeBadCursor:           ladder.RPCInvalidParams,
	ladder.CodeBodyTooLarge:        ladder.RPCRefused,
	ladder.CodeBodyTimeout:         ladder.RPCRefused,
	ladder.CodeUnsupportedMedia:    ladder.RPCRefused,
	ladder.CodeConflict:            ladder.RPCRefused,
	ladder.CodeIdempotencyKeyUsed:  ladder.RPCInvalidParams,
	ladder.CodeAlreadyReviewed:     ladder.RPCRefused,
	ladder.CodeApprovalClosed:      ladder.RPCRefused,
	ladder.CodeApprovalExpired:     ladder.RPCRefused,
	ladder.CodeStepNeedsPerson:     ladder.RPCRefused,
	ladder.CodeGateHeld:            ladder.RPCRefused,
	ladder.CodeUnknownCase:         ladder.RPCInvalidParams,
	ladder.CodeUnknownFunction:     ladder.RPCInvalidParams,
	ladder.CodeBypassToHuman:       ladder.RPCRefused,
	ladder.CodeEvidenceInvalid:     ladder.RPCInvalidParams,
	ladder.CodeRateLimited:         ladder.RPCRefused,
	ladder.CodeOverloaded:          ladder.RPCRefused,
	ladder.CodeOriginRefused:       ladder.RPCRefused,
	ladder.CodeUnsupportedProtocol: ladder.RPCUnsupportedProtocolVersion,
	ladder.CodeAuditUnavailable:    ladder.RPCRefused,
	ladder.CodeUpstreamTimeout:     ladder.RPCRefused,
	ladder.CodeUpstreamFailed:      ladder.RPCRefused,
	ladder.CodeOutcomeUnknown:      ladder.RPCRefused,
	ladder.CodeServerUnreachable:   ladder.RPCRefused,
	ladder.CodeMethodNotAllowed:    ladder.RPCRefused,
	ladder.CodeInternal:            ladder.RPCInternal,
}

// RPCCode returns the JSON-RPC error code that answers a refusal of code c;
// a code without a row is answered as INTERNAL is.
func RPCCode(c ladder.Code) int {
	if n, ok := rpcCodeOf[c]; ok {
		return n
	}
	return ladder.RPCInternal
}

// rpcCode is the code e is answered with: its own when it carries one.
func rpcCode(e *ladder.Error) int {
	if e.RPCCode != 0 {
		return e.RPCCode
	}
	return RPCCode(e.Code)
}

// RPCCode is RPCCode as a method, so the HTTP server answers the refusals
// it makes on /mcp (admission) from this table too (lhttp.RPCCoder).
func (h *Handler) RPCCode(c ladder.Code) int { return RPCCode(c) }

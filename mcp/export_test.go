package mcp

// SDKOnly turns the tools/call fast path off, so tests can compare its
// answers with the SDK's.
func SDKOnly(h *Handler) { h.sdkOnly = true }

// FastCalls is how many tools/call requests the fast path answered.
func FastCalls(h *Handler) int64 { return h.fastCalls.Load() }

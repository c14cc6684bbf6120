package mcp

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/service"
)

// extendWrite gives the answer of a call that waits up to wait the time
// to be written after it: a tool that waits (approval_status with wait)
// moves the request's write deadline past the server's WriteTimeout, which
// runs from the start of the request.
func extendWrite(ctx context.Context, wait time.Duration) {
	if c, ok := callFrom(ctx); ok && c.w != nil {
		_ = http.NewResponseController(c.w).SetWriteDeadline(time.Now().Add(wait + 30*time.Second))
	}
}

// MetaWait is the tools/call _meta key that makes a capability call wait
// for a person's decision, in seconds (0 to 60), when the call needs one.
// It travels in _meta rather than in the arguments because a capability's
// extra arguments merge into its payload: a payload field named wait must
// stay the payload's.
const MetaWait = "ladder/wait"

// callWaitKey holds, in a tools/call's context, the value of its _meta
// MetaWait as the client sent it.
type callWaitKey struct{}

// withCallWait keeps the request's _meta MetaWait, if any, for the tool.
func withCallWait(ctx context.Context, meta map[string]any) context.Context {
	v, ok := meta[MetaWait]
	if !ok {
		return ctx
	}
	return context.WithValue(ctx, callWaitKey{}, v)
}

// callWait is the wait a tools/call asked for in _meta: 0 when none, an
// INVALID_FIELD refusal when it is not a whole number of seconds from 0
// to 60.
func callWait(ctx context.Context) (time.Duration, error) {
	v := ctx.Value(callWaitKey{})
	if v == nil {
		return 0, nil
	}
	n, ok := v.(float64)
	if !ok || n != math.Trunc(n) || n < 0 || n > service.MaxApprovalWait.Seconds() {
		return 0, ladder.InvalidField("_meta."+MetaWait, fmt.Sprintf("The _meta %s %v is not a whole number of seconds from 0 to 60.", MetaWait, v),
			`send "_meta": {"`+MetaWait+`": 30} to wait up to 30 seconds for a person's decision, or leave it out to answer at once`)
	}
	return time.Duration(n) * time.Second, nil
}

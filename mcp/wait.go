package mcp

import (
	"context"
	"net/http"
	"time"
)

// writeDeadlineKey holds, in a tools/call's context, the function that
// moves the answer's write deadline.
type writeDeadlineKey struct{}

// withWriteDeadline lets a tool that waits (approval_status with wait)
// move w's write deadline past the server's WriteTimeout, which runs from
// the start of the request.
func withWriteDeadline(ctx context.Context, w http.ResponseWriter) context.Context {
	return context.WithValue(ctx, writeDeadlineKey{}, func(t time.Time) {
		_ = http.NewResponseController(w).SetWriteDeadline(t)
	})
}

// extendWrite gives the answer of a call that waits up to wait the time
// to be written after it.
func extendWrite(ctx context.Context, wait time.Duration) {
	if f, ok := ctx.Value(writeDeadlineKey{}).(func(time.Time)); ok {
		f(time.Now().Add(wait + 30*time.Second))
	}
}

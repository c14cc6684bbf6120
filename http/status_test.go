package http

import (
	"testing"

	"github.com/ladderhq/ladder"
)

// Every refusal name has an HTTP status, and the table names no refusal
// the root package does not: a new code cannot ship answered as INTERNAL.
func TestEveryCodeHasAStatus(t *testing.T) {
	names := map[ladder.Code]bool{}
	for _, c := range ladder.Codes() {
		names[c.Code] = true
		s, ok := statusOf[c.Code]
		if !ok {
			t.Errorf("%s has no HTTP status in statusOf", c.Code)
			continue
		}
		if s < 400 || s > 599 {
			t.Errorf("%s answers HTTP %d, not an error status", c.Code, s)
		}
	}
	for c := range statusOf {
		if !names[c] {
			t.Errorf("statusOf has a row for %s, which ladder.Codes does not list", c)
		}
	}
	if got := Status("NO_SUCH_CODE"); got != Status(ladder.CodeInternal) {
		t.Errorf("an unknown code answers %d, want INTERNAL's %d", got, Status(ladder.CodeInternal))
	}
}

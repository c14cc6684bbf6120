package service

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/ladderhq/ladder"
)

// cursor is an opaque page cursor over a sequence number. Its prefix names
// the list and the format version, so a cursor of one list is refused by
// another (BAD_CURSOR) instead of paging it from a wrong place.
type cursor struct {
	prefix string // e.g. "gh1:"
	hint   string // how to get a good cursor, for the refusal
}

var (
	gateCursor     = cursor{"gh1:", "pass next_cursor from the previous {{gate_history}} page unchanged, or leave cursor out to start from the newest decision"}
	approvalCursor = cursor{"ap1:", "pass next_cursor from the previous page unchanged, or leave cursor out for the newest approvals"}
	// keyCursor counts the keys already listed: keys are listed oldest
	// first and never deleted (a revoked key stays), so a position stays
	// put while keys are added.
	keyCursor = cursor{"ky1:", "pass next_cursor from the previous {{keys_list}} page unchanged, or leave cursor out to start from the oldest key"}
)

func (c cursor) encode(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.prefix + strconv.FormatInt(seq, 10)))
}

func (c cursor) decode(s string) (int64, error) {
	bad := &ladder.Error{Code: ladder.CodeBadCursor, Message: "The cursor is not one this server issued.", Hint: c.hint, Data: map[string]any{"field": "cursor"}}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, bad
	}
	digits, ok := strings.CutPrefix(string(raw), c.prefix)
	if !ok {
		return 0, bad
	}
	seq, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || seq <= 0 || strconv.FormatInt(seq, 10) != digits {
		return 0, bad
	}
	return seq, nil
}

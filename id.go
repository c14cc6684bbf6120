package ladder

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"strings"
	"time"
)

// idEncoding is base32 with the "extended hex" alphabet in lower case
// (0-9, a-v), whose characters sort in the order of the values they
// encode: ids compare as their bytes do.
var idEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// idLen is the length of an id's encoded part: 16 bytes in base32.
const idLen = 26

// NewID returns an id with a readable prefix ("rt", "rv", "ap", …): the
// creation time in milliseconds, then 80 random bits, so ids cannot be
// guessed or enumerated across workspaces. The time comes first so that the
// ids written together sort together: a store's index on ids takes a batch
// of new rows on one page at its end, not one page per row scattered over
// the whole index (about a third of the pages a route's commit wrote,
// BENCHMARKS.md). The time an id shows is its record's own, which the
// record states anyway.
func NewID(prefix string) string {
	return newIDAt(prefix, time.Now())
}

// newIDAt is NewID at the time t.
func newIDAt(prefix string, t time.Time) string {
	var b [16]byte
	ms := uint64(t.UnixMilli())
	binary.BigEndian.PutUint16(b[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(b[2:6], uint32(ms))
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails on supported platforms
	var enc [idLen]byte
	idEncoding.Encode(enc[:], b[:])
	// One allocation: every record of every call takes an id.
	var sb strings.Builder
	sb.Grow(len(prefix) + 1 + idLen)
	sb.WriteString(prefix)
	sb.WriteByte('_')
	sb.Write(enc[:])
	return sb.String()
}

// ISOWeek returns t's ISO week as "2026-W35" and the Monday 00:00 UTC that
// starts it.
func ISOWeek(t time.Time) (string, time.Time) {
	t = t.UTC()
	y, w := t.ISOWeek()
	wd := (int(t.Weekday()) + 6) % 7 // Monday = 0
	start := time.Date(t.Year(), t.Month(), t.Day()-wd, 0, 0, 0, 0, time.UTC)
	return isoWeekString(y, w), start
}

func isoWeekString(y, w int) string {
	b := []byte{byte('0' + y/1000%10), byte('0' + y/100%10), byte('0' + y/10%10), byte('0' + y%10), '-', 'W', byte('0' + w/10), byte('0' + w%10)}
	return string(b)
}

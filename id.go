package ladder

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"strings"
	"time"
)

// idEncoding is base32 with the "extended hex" alphabet (0-9, a-v once
// lowercased), whose characters sort in the order of the values they
// encode: ids compare as their bytes do.
var idEncoding = base32.HexEncoding.WithPadding(base32.NoPadding)

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
	return prefix + "_" + strings.ToLower(idEncoding.EncodeToString(b[:]))
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

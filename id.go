package ladder

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
	"time"
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewID returns a random id with a readable prefix ("rt", "rv", "ap", …):
// 80 random bits, so ids cannot be guessed or enumerated across workspaces.
func NewID(prefix string) string {
	var b [10]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
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

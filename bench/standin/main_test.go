package main

import (
	"strings"
	"testing"
)

// TestRefusesAddressesOffThisMachine: the stand-ins answer anyone without
// a key, so an address another machine could reach is refused before
// anything listens, and a malformed one says what to give instead.
func TestRefusesAddressesOffThisMachine(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:18954":     "loopback only",
		":18954":            "loopback only",
		"192.0.2.1:18954":   "loopback only",
		"example.com:18954": "loopback only",
		"18954":             "want host:port",
	} {
		err := run(addr)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("run(%q) = %v, want an error saying %q", addr, err, want)
		}
	}
}

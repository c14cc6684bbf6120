package migrate

import (
	"strings"
	"testing"
)

// TestCheckNewest: a database at or behind the binary's newest migration
// opens; one ahead of it is refused with both versions named.
func TestCheckNewest(t *testing.T) {
	ms := []Migration{{Version: 1, Name: "0001_a.sql"}, {Version: 3, Name: "0003_c.sql"}}
	for _, newest := range []int{0, 1, 3} {
		if err := CheckNewest(ms, newest); err != nil {
			t.Errorf("database at %d, binary at 3: %v", newest, err)
		}
	}
	err := CheckNewest(ms, 4)
	if err == nil || !strings.Contains(err.Error(), "schema version 4 is newer than this binary knows (3)") {
		t.Errorf("database at 4, binary at 3: err = %v", err)
	}
	if err := CheckNewest(nil, 1); err == nil {
		t.Errorf("a binary with no migrations opened a database at 1")
	}
}

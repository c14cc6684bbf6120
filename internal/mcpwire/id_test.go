package mcpwire_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ladderhq/ladder/internal/mcpwire"
)

// TestIDs pins, for each kind of id, the three rules that decide its fate:
// whether it is refused (CheckID, with a reason naming what is wrong),
// what a refusal echoes (EchoID), and whether go-sdk gives it back byte for
// byte (SimpleID), which the server's fast path requires.
func TestIDs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		id     string
		refuse string // a fragment of CheckID's reason; "" passes
		echo   string // EchoID's answer; "" is nil
		simple bool
	}{
		{"absent (a notification)", ``, "", "", false},
		{"null", `null`, "", "", false},
		{"zero", `0`, "", `0`, true},
		{"small integer", `7`, "", `7`, true},
		{"negative integer", `-7`, "", `-7`, true},
		{"15 digits", `123456789012345`, "", `123456789012345`, true},
		{"16 digits, still exact", `1234567890123456`, "", `1234567890123456`, false},
		{"largest exact integer", `9007199254740991`, "", `9007199254740991`, false},
		{"smallest exact integer", `-9007199254740991`, "", `-9007199254740991`, false},
		{"one past the exact integers", `9007199254740992`, "beyond ±9007199254740991", `9007199254740992`, false},
		{"beyond int64", `123456789012345678901234567890`, "beyond ±", `123456789012345678901234567890`, false},
		{"negative zero", `-0`, "-0 would come back as 0", `-0`, false},
		{"fraction", `1.5`, "1.5 is not an integer", `1.5`, false},
		{"integral fraction", `1.0`, "1.0 is not an integer", `1.0`, false},
		{"exponent", `1e2`, "1e2 is not an integer", `1e2`, false},
		{"huge exponent", `1.5e300`, "is not an integer", `1.5e300`, false},
		{"leading zero", `01`, "", `01`, false},
		{"plain string", `"req-1"`, "", `"req-1"`, true},
		{"empty string", `""`, "", `""`, true},
		{"string with an escape", `"a\u0041"`, "", `"a\u0041"`, false},
		{"string with HTML", `"<&>"`, "", `"<&>"`, true},
		{"string with a surrogate pair", `"\ud83d\ude00"`, "", `"\ud83d\ude00"`, false},
		{"string of UTF-8", `"é"`, "", `"é"`, false},
		{"lone high surrogate", `"\ud800"`, "unpaired UTF-16 surrogate (\\ud800)", `"\ud800"`, false},
		{"lone low surrogate", `"a\udc00b"`, "unpaired UTF-16 surrogate (\\udc00)", `"a\udc00b"`, false},
		{"boolean", `true`, "not a boolean", "", false},
		{"object", `{}`, "not an object", "", false},
		{"array", `[1]`, "not an array", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := json.RawMessage(tc.id)
			err := mcpwire.CheckID(id)
			switch {
			case tc.refuse == "" && err != nil:
				t.Errorf("CheckID(%s) = %v, want it accepted", tc.id, err)
			case tc.refuse != "" && err == nil:
				t.Errorf("CheckID(%s) accepted it, want a refusal saying %q", tc.id, tc.refuse)
			case err != nil && (!strings.Contains(err.Reason, tc.refuse) || err.Error() != "id: "+err.Reason):
				t.Errorf("CheckID(%s) = %q, want a reason saying %q", tc.id, err.Error(), tc.refuse)
			}
			if got := mcpwire.EchoID(id); string(got) != tc.echo || (tc.echo == "") != (got == nil) {
				t.Errorf("EchoID(%s) = %q, want %q", tc.id, got, tc.echo)
			}
			if got := mcpwire.SimpleID(id); got != tc.simple {
				t.Errorf("SimpleID(%s) = %v, want %v", tc.id, got, tc.simple)
			}
			if tc.simple && err != nil {
				t.Errorf("%s is echoed byte for byte but refused", tc.id)
			}
		})
	}
}

// TestClientIDs: every id the client sends passes the server's checks and
// comes back byte for byte, so the client may match answers by bytes.
func TestClientIDs(t *testing.T) {
	for _, n := range []int64{0, 1, 42, 1 << 40, 1<<63 - 1} {
		id := mcpwire.ClientID(n)
		if !json.Valid(id) || !mcpwire.SimpleID(id) || mcpwire.CheckID(id) != nil {
			t.Errorf("ClientID(%d) = %s, which the server would not echo unchanged", n, id)
		}
	}
	if a, b := mcpwire.ClientID(1), mcpwire.ClientID(2); string(a) == string(b) {
		t.Errorf("ClientID gives %s for two requests", a)
	}
}

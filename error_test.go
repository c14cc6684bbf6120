package ladder_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ladderhq/ladder"
)

// Every constructor gives a refusal whose name is in the table and whose
// message is a sentence saying what was wrong: not empty, not the bare
// name, one line.
func TestConstructorsGiveASentence(t *testing.T) {
	known := map[ladder.Code]bool{}
	for _, c := range ladder.Codes() {
		known[c.Code] = true
		if c.Meaning == "" {
			t.Errorf("%s has no meaning in the table", c.Code)
		}
	}
	human := ladder.Principal{KeyID: "k", Workspace: "w", Kind: ladder.KeyHuman}
	agent := ladder.Principal{KeyID: "k", Workspace: "w", Kind: ladder.KeyAgent}
	admin := ladder.Principal{KeyID: "k", Workspace: "w", Kind: ladder.KeyAdmin}
	cases := []struct {
		name string
		err  *ladder.Error
		code ladder.Code
	}{
		{"InvalidField", ladder.InvalidField("item", "The item field is required.", "give the id of the work item"), ladder.CodeInvalidArgument},
		{"NotFound", ladder.NotFound(ladder.CodeRouteNotFound, `No route "r1" is in this workspace.`, "use the route_id a route answer gave"), ladder.CodeRouteNotFound},
		{"Refused", ladder.Refused(ladder.CodeGateHeld, "The evidence gate did not pass.", "send the evidence the gate asks for"), ladder.CodeGateHeld},
		{"Errorf", ladder.Errorf(ladder.CodeNotFound, "list keys", "No key %q is in this workspace.", "k1"), ladder.CodeNotFound},
		{"AsError of an unknown error", ladder.AsError(errors.New("disk on fire")), ladder.CodeInternal},
		{"CheckKeyKind human", ladder.CheckKeyKind(human, ladder.KeyAgent), ladder.CodeHumanKeyRefused},
		{"CheckKeyKind agent", ladder.CheckKeyKind(agent, ladder.KeyHuman), ladder.CodeAgentKeyRefused},
		{"CheckKeyKind admin", ladder.CheckKeyKind(admin, ladder.KeyAgent, ladder.KeyHuman), ladder.CodeKeyKindRefused},
	}
	for _, c := range cases {
		e := c.err
		if e == nil {
			t.Errorf("%s: no refusal", c.name)
			continue
		}
		if e.Code != c.code || !known[e.Code] {
			t.Errorf("%s: code %s, want %s (in the table)", c.name, e.Code, c.code)
		}
		if msg := strings.TrimSpace(e.Message); msg == "" || msg == string(e.Code) || strings.Contains(msg, "\n") || len(strings.Fields(msg)) < 3 || !isSentence(msg) {
			t.Errorf("%s: message %q is not a sentence saying what was wrong", c.name, e.Message)
		}
		if e.Hint == "" {
			t.Errorf("%s: no hint", c.name)
		}
	}
	if f := ladder.InvalidField("item", "item is required", "h").Data["field"]; f != "item" {
		t.Errorf("InvalidField: data.field = %v, want item", f)
	}
}

// CheckKeyKind admits the allowed kinds and names the kind it refuses,
// with the hint naming the kinds to use (REST answers it as it is).
func TestCheckKeyKind(t *testing.T) {
	p := func(k ladder.KeyKind) ladder.Principal { return ladder.Principal{KeyID: "k", Workspace: "w", Kind: k} }
	tests := []struct {
		kind    ladder.KeyKind
		allowed []ladder.KeyKind
		code    ladder.Code
		message string
		hint    string
	}{
		{ladder.KeyAgent, []ladder.KeyKind{ladder.KeyAgent}, "", "", ""},
		{ladder.KeyHuman, []ladder.KeyKind{ladder.KeyAgent, ladder.KeyHuman}, "", "", ""},
		{ladder.KeyHuman, []ladder.KeyKind{ladder.KeyAgent}, ladder.CodeHumanKeyRefused, "A human key cannot be used here.", "use an agent key of this workspace"},
		{ladder.KeyAgent, []ladder.KeyKind{ladder.KeyHuman}, ladder.CodeAgentKeyRefused, "An agent key cannot be used here.", "use a human key of this workspace"},
		{ladder.KeyAdmin, []ladder.KeyKind{ladder.KeyAgent, ladder.KeyHuman}, ladder.CodeKeyKindRefused, "This admin key cannot be used here.", "use an agent or human key of this workspace"},
	}
	for _, tt := range tests {
		e := ladder.CheckKeyKind(p(tt.kind), tt.allowed...)
		if tt.code == "" {
			if e != nil {
				t.Errorf("%s key, allowed %v: refused with %v", tt.kind, tt.allowed, e)
			}
			continue
		}
		if e == nil || e.Code != tt.code || e.Message != tt.message || e.Hint != tt.hint {
			t.Errorf("%s key, allowed %v: got %+v, want %s %q %q", tt.kind, tt.allowed, e, tt.code, tt.message, tt.hint)
		}
	}
}

package strictjson_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ladderhq/ladder/internal/strictjson"
)

type body struct {
	Step     string         `json:"step"`
	Item     string         `json:"item"`
	Features map[string]any `json:"features,omitempty"`
	Nested   *struct {
		Severity int `json:"severity"`
	} `json:"nested,omitempty"`
}

func TestUnmarshalRejects(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70)
	tests := []struct {
		name, in, want string
	}{
		{"duplicate key", `{"step":"a","step":"b"}`, "step: duplicate key"},
		{"case variant", `{"Step":"a"}`, `Step: key differs only in case from "step"`},
		{"nested case variant", `{"nested":{"Severity":1}}`, `nested.Severity: key differs only in case`},
		{"unknown field", `{"stepp":"a"}`, "stepp: unknown field; expected one of features, item, nested, step"},
		{"NUL suffixed key", "{\"step\\u0000\":\"a\"}", "contains a NUL character"},
		{"invalid UTF-8 key", "{\"st\xffep\":\"a\"}", "not valid UTF-8"},
		{"too deep", `{"features":` + deep + `}`, "nesting deeper than 64"},
		{"trailing data", `{"step":"a"} {}`, "unexpected data after the JSON value"},
		{"empty", ``, "empty body"},
		{"wrong type", `{"step":5}`, "step: expected string"},
		{"duplicate inside free-form map", `{"features":{"w":1,"w":2}}`, "features.w: duplicate key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b body
			err := strictjson.Unmarshal([]byte(tt.in), &b)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Unmarshal(%q) error = %v, want it to contain %q", tt.in, err, tt.want)
			}
		})
	}
}

func TestUnmarshalAccepts(t *testing.T) {
	var b body
	if err := strictjson.Unmarshal([]byte(`{"step":"post_tms","item":"B-1","features":{"Weight":2,"weight":3},"nested":{"severity":2}}`), &b); err != nil {
		t.Fatal(err)
	}
	if b.Step != "post_tms" || b.Item != "B-1" || b.Nested.Severity != 2 || len(b.Features) != 2 {
		t.Fatalf("decoded %+v", b)
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"step":"a","item":"b"}`))
	f.Add([]byte(`{"Step":"a"}`))
	f.Add([]byte(`{"features":{"a":[1,2,{"b":null}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var b body
		_ = strictjson.Unmarshal(data, &b) // must not panic
	})
}

// TestFaultsNamedInAStableOrder: with several unknown keys the error names
// the same one every time (the first in sorted order), so a client, a log
// and a golden transcript see one answer for one body.
func TestFaultsNamedInAStableOrder(t *testing.T) {
	var v struct {
		Step string `json:"step"`
	}
	body := []byte(`{"zeta":1,"beta":2,"alpha":3,"step":"x","gamma":4}`)
	for range 50 {
		err := strictjson.Unmarshal(body, &v)
		var se *strictjson.Error
		if !errors.As(err, &se) || se.Path != "alpha" {
			t.Fatalf("error = %v, want the unknown field alpha named", err)
		}
	}
}

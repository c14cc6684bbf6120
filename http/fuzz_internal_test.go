package http

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/ladderhq/ladder"
)

// FuzzDecodeBody feeds REST body decoding arbitrary bytes for the route
// and authorize requests: it never panics, and every failure is a refusal
// with a name (INVALID_JSON, INVALID_ARGUMENT or BODY_TOO_LARGE), never an
// internal error.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		`{"step":"post_tms","item":"B-1"}`,
		`{"step":"post_tms","item":"B-1","features":{"amount":12.5,"tags":["a"]}}`,
		`{"step":"a","Step":"b"}`,
		`{"step":"a","step":"b"}`,
		"{\"step\\u0000\":\"a\"}",
		"{\"step\":\"\xff\"}",
		`{"case":"release_payment","precondition_fn":"score_release_hold","evidence":{"bill_id":"B-1","pod_received":true}}`,
		`[1,2,3]`, `"x"`, `{"features":` + string(bytes.Repeat([]byte("["), 80)) + `}`,
		`{"step":"post_tms","item":"B-1","features":{"bill_id":"a","Bill_id":"b"}}`,
		`{"step":"post_tms","item":"B-1","features":{"amount_usd":1e400}}`,
		`{"case":"release_payment","precondition_fn":"score_release_hold","evidence":{"checks":[{"ok":true,"OK":false}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range []any{&ladder.RouteRequest{}, &ladder.AuthorizeRequest{}, &createKeyRequest{}} {
			r := httptest.NewRequest("POST", "/v1/route", bytes.NewReader(data))
			err := decode(r, v)
			if err == nil {
				continue
			}
			var le *ladder.Error
			if !errors.As(err, &le) {
				t.Fatalf("decode %q: %v is not a refusal", data, err)
			}
			switch le.Code {
			case ladder.CodeInvalidJSON, ladder.CodeInvalidArgument, ladder.CodeBodyTooLarge:
			default:
				t.Fatalf("decode %q: refusal %s", data, le.Code)
			}
		}
	})
}

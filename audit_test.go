package ladder_test

import (
	"encoding/json"
	"testing"

	"github.com/ladderhq/ladder"
)

func TestAuditStepOf(t *testing.T) {
	for _, tc := range []struct {
		data        string
		queue, step string
	}{
		{`{"item":"B-1","queue":"bills","step":"post_tms"}`, "bills", "post_tms"},
		{`{"step":"post_tms"}`, "", "post_tms"},
		{`{"queue":"bills"}`, "bills", ""},
		{`{"queue":3,"step":"post_tms"}`, "", "post_tms"},
		{`{"queue":"bills","step":{"id":"post_tms"}}`, "bills", ""},
		{`{"payload":{"queue":"bills","step":"post_tms"}}`, "", ""}, // nested: not the record's step
		{`null`, "", ""},
		{`["bills","post_tms"]`, "", ""},
		{``, "", ""},
		{`{"step":`, "", ""},
	} {
		q, s := ladder.AuditStepOf(json.RawMessage(tc.data))
		if q != tc.queue || s != tc.step {
			t.Errorf("AuditStepOf(%s) = %q, %q; want %q, %q", tc.data, q, s, tc.queue, tc.step)
		}
	}
}

func TestAuditEncoderRefusesUnknownFormat(t *testing.T) {
	_, err := ladder.NewAuditEncoder(nil, "xml")
	if e := ladder.AsError(err); e.Code != ladder.CodeInvalidArgument || e.Data["field"] != "format" {
		t.Errorf("format xml: %v", err)
	}
}

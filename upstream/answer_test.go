package upstream

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// ledgerAnswer is the demo stand-in ledger's answer to readLedger, as go-sdk
// writes it.
const ledgerAnswer = `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"balance\":80.5,\"entries\":[{\"amount\":125,\"currency\":\"USD\",\"date\":\"2026-10-01\",\"description\":\"Referral commission, order 1042\"}],\"program\":\"partner-2027\"}"}],"structuredContent":{"balance":80.5,"entries":[{"amount":125,"currency":"USD","date":"2026-10-01","description":"Referral commission, order 1042"}],"program":"partner-2027"}}}`

// answers are what an upstream may send: the answers the fast path reads
// (with structured content or without, an error result, other members)
// and the ones it leaves to encoding/json (a JSON-RPC error, a request,
// keys in another case or escaped, keys twice, nulls, values of another
// type, not JSON at all).
var answers = []string{
	ledgerAnswer,
	`{"jsonrpc":"2.0","id":"c-7","result":{"content":[{"type":"text","text":"no such program"}],"isError":true}}`,
	` {"id":2,"jsonrpc":"2.0","result":{"isError":false,"content":[],"_meta":{"k":1},"resultType":"complete"},"extra":[1]} `,
	`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"},{"type":"text","text":"a\u00e9\n"}]}}`,
	`{"jsonrpc":"2.0","id":3,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":7}],"structuredContent":{"a":1}}}`,
	`{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"unknown tool"}}`,
	`{"jsonrpc":"2.0","id":5,"method":"ping"}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`,
	`{"JSONRPC":"2.0","Id":1,"Result":{"Content":[],"StructuredContent":{"a":1},"IsError":true}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"\u0063ontent":[],"isError":true}}`,
	`{"jsonrpc":"2.0","id":1,"id":2,"result":{"content":[]}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"isError":true,"isError":false}}`,
	`{"jsonrpc":null,"id":null,"result":{"content":null,"structuredContent":null,"isError":null}}`,
	`{"jsonrpc":"2.0","id":1,"result":null}`,
	`{"jsonrpc":2,"id":1,"result":{"content":{}}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"isError":"yes"}}`,
	`{"jsonrpc":"2.\u0030","id":1,"result":{}}`,
	"{\"jsonrpc\":\"2.0\xff\",\"id\":1,\"result\":{}}",
	`{"jsonrpc":"2.0","id":1,"result":{"content":[]}`,
	`{"jsonrpc":"2.0","id":1,"result":{}}x`,
	`[]`, `null`, ``,
}

// fastAnswers is how many of answers decodeAnswerFast reads.
const fastAnswers = 6

// TestDecodeAnswerFastReadsProxiedAnswers: the answers a proxied call
// reads take the fast path; a fast path that gave up on them would leave
// the cost where it was and still pass FuzzDecodeAnswer.
func TestDecodeAnswerFastReadsProxiedAnswers(t *testing.T) {
	for _, a := range answers[:fastAnswers] {
		if _, ok := decodeAnswerFast([]byte(a)); !ok {
			t.Errorf("decodeAnswerFast gave up on %s", a)
		}
	}
	for _, a := range answers[fastAnswers:] {
		if m, ok := decodeAnswerFast([]byte(a)); ok {
			t.Errorf("decodeAnswerFast read %s as %+v: it is encoding/json's to read", a, m)
		}
	}
}

// FuzzDecodeAnswer holds decodeAnswerFast to json.Unmarshal: whenever the
// fast path answers, encoding/json decodes the same message, content
// included once Texts has decoded it; or it refuses the content, and so
// does Texts.
func FuzzDecodeAnswer(f *testing.F) {
	for _, a := range answers {
		f.Add([]byte(a))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := decodeAnswerFast(data)
		if !ok {
			return
		}
		_, terr := got.Result.Texts()
		var want toolMessage
		if err := json.Unmarshal(data, &want); err != nil {
			if terr == nil {
				t.Fatalf("%q: the fast path read %+v, encoding/json refuses it: %v", data, got, err)
			}
			return
		}
		if terr != nil {
			t.Fatalf("%q: Texts refuses the content encoding/json reads: %v", data, terr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\nfast    %+v %+v\nreference %+v %+v", data, got, got.Result, want, want.Result)
		}
	})
}

// TestReadAllMatchesReadAll: readAll reads what io.ReadAll over a
// LimitReader reads, whether the body's stated size is right, unknown,
// zero, at or past the limit, or short of the bytes that come.
func TestReadAllMatchesReadAll(t *testing.T) {
	const limit = 2 * presizeMax
	for _, n := range []int{0, 1, 511, 512, 513, len(ledgerAnswer), presizeMax, presizeMax + 1, limit - 1, limit, limit + 1, 3 * limit} {
		body := strings.Repeat("x", n)
		for _, size := range []int64{-1, 0, int64(n), int64(n) / 2, int64(n) + 7, presizeMax, presizeMax + 1, limit - 1, limit, limit + 1} {
			want, werr := io.ReadAll(io.LimitReader(strings.NewReader(body), limit))
			got, gerr := readAll(iotest.OneByteReader(strings.NewReader(body)), size, limit)
			if string(got) != string(want) || (gerr == nil) != (werr == nil) {
				t.Errorf("%d bytes, stated %d: read %d bytes (%v), want %d (%v)", n, size, len(got), gerr, len(want), werr)
			}
		}
	}
	// A stated length is not an allocation an upstream can ask for: past
	// presizeMax, the buffer grows with what arrives.
	if got, err := readAll(strings.NewReader("{}"), limit-1, limit); err != nil || string(got) != "{}" || cap(got) > 4096 {
		t.Errorf("2 bytes stated as %d: read %q (%v) into %d bytes of capacity", limit-1, got, err, cap(got))
	}
	failing := io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(io.ErrUnexpectedEOF))
	if got, err := readAll(failing, 10, limit); !errors.Is(err, io.ErrUnexpectedEOF) || string(got) != "abc" {
		t.Errorf("a failing body: read %q, %v; want \"abc\" and the reader's error", got, err)
	}
}

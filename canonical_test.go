package ladder

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// canonicalEscapeSeeds are documents whose strings the fast path writes
// again rather than copies: escapes of every kind, surrogate pairs and
// unpaired surrogates, raw U+2028 and U+2029.
var canonicalEscapeSeeds = []string{
	`{"memo":"first line\nsecond \"quoted\" \\ \/ \b\f\r\t","vendor":"AT\u0026T \u003cb\u003e"}`,
	`["\u0000\u001f\u007f\u0080\u00e9\u2028\u2029\uFFFD\uabcd\uABCD"]`,
	`["\ud83d\ude00","\ud800","\udc00","\ud800\ud800","\ud800x","\ude00\ud83d","\ud800\u0041"]`,
	"[\"raw \u2028 and \u2029\",\"tab\\there\"]",
	`{"a":"x\u0041"}`, `{"a":"<&>"}`, "{\"a\":\"\u2028\"}",
}

// canonicalSeeds are documents for the differential test and the fuzz
// target: the common shapes, and the ones the fast path must hand over.
var canonicalSeeds = append([]string{
	`{"step":"post_tms","item":"BENCH-1","lane":"auto","features":{"b":1,"a":[1,2.5e3,-0,true,false,null]}}`,
	`{"z":1,"a":{"y":"é","x":"日本"},"m":[{"b":2,"a":1}]}`,
	` [ 1 , 2 ] `,
	`"plain"`, `12`, `-0.5E+3`, `true`, `null`, `{}`, `[]`, ``,
	`{"a":1,"a":2}`, `{"b":1,"a":2,"a":3}`, "{\"a\":\"\xff\"}", `{"a":1} trailing`, `{"a":1}{}`,
	`{"a":01}`, `{"a":1.}`, `{"a":tru}`, `{"a":truex}`, `[1,]`, `{"a":1,}`, `{"a" 1}`,
	`{"B":1,"a":2,"A":3,"b":4}`, `[[[[[[]]]]]]`, `1e400`, `{"":1," ":2}`,
	`["\'"]`, `["\x41"]`, `["\u12"]`, `["\u12g4"]`, `["\ud800\u12"]`, `["\`, `["a\"]`,
	"[\"\\u00e9 then raw \xff\"]", "[\"\\n then control \x01\"]",
	`{"a\nb":1}`, `{"\u0061":1,"a":2}`, "{\"\u2028\":1}",
	`{"step":"a\nb","queue":"q\u0026"}`, `{"Step":"plain","note":"\"x\""}`,
}, append(canonicalEscapeSeeds, manyKeys(40, -1), `[`+manyKeys(17, 7)+`,{"b":`+manyKeys(100, -1)+`}]`)...)

// manyKeys is an object of n members with keys in reverse order, past
// reorder's insertion sort; dup, if positive, is a key written twice.
func manyKeys(n, dup int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := n; i > 0; i-- {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		if i == dup {
			fmt.Fprintf(&b, `"k%d":"again",`, i)
		}
	}
	return strings.TrimSuffix(b.String(), ",") + "}"
}

// TestCanonicalFastMatchesReference requires the fast path to produce what
// the reference path does whenever it answers, and to answer for the
// common documents.
func TestCanonicalFastMatchesReference(t *testing.T) {
	answers := map[string]bool{
		canonicalSeeds[0]: true, canonicalSeeds[1]: true, canonicalSeeds[2]: true,
		`{"a":1,"a":2}`: false, `{"a":1} trailing`: false, `{"a":01}`: false,
		// Malformed escapes, invalid UTF-8 and keys with escapes are
		// handed over (escapes in values are not: canonicalEscapeSeeds).
		`["\'"]`: false, `["\u12g4"]`: false, `["a\"]`: false, "[\"\\u00e9 then raw \xff\"]": false,
		`{"a\nb":1}`: false, `{"\u0061":1,"a":2}`: false, "{\"\u2028\":1}": false,
	}
	for _, s := range canonicalEscapeSeeds {
		answers[s] = true
	}
	answers[manyKeys(40, -1)] = true                                     // sorted by slices.SortFunc
	answers[`[`+manyKeys(17, 7)+`,{"b":`+manyKeys(100, -1)+`}]`] = false // a duplicate among many
	for _, s := range canonicalSeeds {
		got, ok := canonicalFast(nil, []byte(s))
		if want, listed := answers[s]; listed && ok != want {
			t.Errorf("canonicalFast(%q) answered %v, want %v", s, ok, want)
		}
		if !ok {
			continue
		}
		want, err := canonicalReference([]byte(s))
		if err != nil {
			t.Errorf("canonicalFast(%q) = %q, but the reference path fails: %v", s, got, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("canonicalFast(%q) = %q, reference %q", s, got, want)
		}
	}
}

// FuzzCanonicalFast: whenever the fast path answers, the reference path
// succeeds with the same bytes.
func FuzzCanonicalFast(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := canonicalFast(nil, raw)
		if !ok {
			return
		}
		want, err := canonicalReference(raw)
		if err != nil {
			t.Fatalf("canonicalFast(%q) = %q, but the reference path fails: %v", raw, got, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("canonicalFast(%q) = %q, reference %q", raw, got, want)
		}
	})
}

// TestCanonicalRecordFastPath compares AuditRecord.Canonical's hand-written
// form with encoding/json's, for records it writes by hand and for ones it
// must hand over.
func TestCanonicalRecordFastPath(t *testing.T) {
	at := time.Date(2026, 12, 2, 4, 30, 0, 123456000, time.FixedZone("x", 3600))
	base := AuditRecord{Seq: 42, AuditEntry: AuditEntry{Workspace: "vantrow-bills", Actor: "key_abc", Kind: AuditRoute, Subject: "bills/post_tms/BENCH-1", At: at,
		Data: json.RawMessage(`{"item":"BENCH-1","lane":"auto"}`)}}
	tests := []struct {
		name string
		edit func(r *AuditRecord)
		fast bool
	}{
		{"plain", func(*AuditRecord) {}, true},
		{"whole second", func(r *AuditRecord) { r.At = r.At.Truncate(time.Second) }, true},
		{"negative seq", func(r *AuditRecord) { r.Seq = -1 }, true},
		{"quote in subject", func(r *AuditRecord) { r.Subject = `a"b` }, false},
		{"html in actor", func(r *AuditRecord) { r.Actor = "<a&b>" }, true},
		{"unicode kind", func(r *AuditRecord) { r.Kind = "é" }, false},
		{"control in workspace", func(r *AuditRecord) { r.Workspace = "a\nb" }, false},
		{"data not canonical", func(r *AuditRecord) { r.Data = json.RawMessage(`{"b":1, "a":2}`) }, false},
		{"data with escape", func(r *AuditRecord) { r.Data = json.RawMessage(`"\u003c"`) }, false},
		{"data null", func(r *AuditRecord) { r.Data = json.RawMessage(`null`) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base
			tt.edit(&r)
			data := r.Data
			got, ok := r.appendCanonicalFast(nil, data)
			if ok != tt.fast {
				t.Fatalf("fast path answered %v, want %v", ok, tt.fast)
			}
			want := r.canonicalReference(data)
			if ok && !bytes.Equal(got, want) {
				t.Errorf("fast %s\nreference %s", got, want)
			}
			if c := r.Canonical(); !bytes.Equal(c, want) {
				t.Errorf("Canonical %s\nreference %s", c, want)
			}
			// Appended after what a buffer holds, with spare room the fast
			// path may scribble on before it gives up: the prefix stays and
			// the record follows it whole.
			prefix := make([]byte, 3, 4096)
			copy(prefix, "abc")
			if c := r.AppendCanonical(prefix); string(c[:3]) != "abc" || !bytes.Equal(c[3:], want) {
				t.Errorf("AppendCanonical after abc: %s\nwant abc%s", c, want)
			}
			// The chain hash is SHA-256 over the previous hash then the record.
			prev := strings.Repeat("7f", 32)
			ref := sha256.Sum256(append([]byte(prev), want...))
			if h := ChainHash(prev, r); h != hex.EncodeToString(ref[:]) {
				t.Errorf("ChainHash = %s, want %x", h, ref)
			}
		})
	}
}

// FuzzCanonicalAuditData: CanonicalAuditData answers as CanonicalJSON and
// AuditStepOf of its result, the two scans it replaces, error and all.
func FuzzCanonicalAuditData(f *testing.F) {
	for _, s := range append(append([]string{
		`{"step":"s","Step":"S","STEP":"T","queue":"q"}`,
		`{"ſtep":"long s","step":3,"Step":"a"}`,
		`{"step":"a","STEP":{"step":"nested"}}`,
		`{"z":1,"queue":"q","a":[{"queue":"no"}],"step":"s"}`,
		`["step","s"]`, `"step"`, `null`, ``, ` `,
		`{"step":"\u2028"}`,
	}, stepSeeds...), canonicalSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		canon, q, s, err := CanonicalAuditData(data)
		want, werr := CanonicalJSON(json.RawMessage(data))
		if (err == nil) != (werr == nil) {
			t.Fatalf("CanonicalAuditData(%q) error %v; CanonicalJSON's %v", data, err, werr)
		}
		if err != nil {
			return
		}
		wq, ws := AuditStepOf(want)
		if !bytes.Equal(canon, want) || q != wq || s != ws {
			t.Fatalf("CanonicalAuditData(%q) = %q, %q, %q; CanonicalJSON and AuditStepOf: %q, %q, %q", data, canon, q, s, want, wq, ws)
		}
	})
}

// BenchmarkCanonicalManyKeys canonicalises objects of many keys in reverse
// order, which an agent's features or an upstream's answer may hold: the
// sort must stay O(n log n) (an insertion sort took 2.6 s at 40,000 keys;
// BENCHMARKS.md, issue 22, session 15).
func BenchmarkCanonicalManyKeys(b *testing.B) {
	for _, n := range []int{16, 1000, 40000} {
		doc := []byte(manyKeys(n, -1))
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := CanonicalJSON(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

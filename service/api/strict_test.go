package api

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// TestStrictRefuses: every way the old decoder was lenient is a 4xx
// naming the field (issue: repeated keys kept the last, names matched in
// any case, null enrolled).
func TestStrictRefuses(t *testing.T) {
	cfg := testConfig()
	for _, c := range []struct {
		body, code, field string
	}{
		{`{"ID":"k1","EPSILON":2,"VALUES":[1,null,5,3]}`, CodeUnknownField, "ID"},
		{`{"id":"k1","Epsilon":2,"values":[1,null,5,3]}`, CodeUnknownField, "Epsilon"},
		{`{"id":"k2","id":"k2b","epsilon":2,"values":[1,null,5,3]}`, CodeDuplicateField, "id"},
		{`{"id":"k2","epsilon":2,"values":[1,null,5,3],"values":[1,1,1,1]}`, CodeDuplicateField, "values"},
		{`{"i\u0064":"k1","id":"k2","epsilon":2,"values":[1,null,5,3]}`, CodeDuplicateField, "id"},
		{`{"id":"k1","epsilon":2,"values":[1,null,5,3],"user":"u"}`, CodeUnknownField, "user"},
		{`{"id":"k1","epsilon":2,"values":[1,null,5,3]} {}`, CodeMalformedJSON, ""},
		{`{"id":"k1","epsilon":2,"values":[1,null,5,3]}x`, CodeMalformedJSON, ""},
		{`null`, CodeWrongType, ""},
		{`[]`, CodeWrongType, ""},
		{`{"id":"k1","epsilon":"2","values":[1,null,5,3]}`, CodeWrongType, "epsilon"},
		{"{\"id\":\"k\xff\",\"epsilon\":2,\"values\":[1,null,5,3]}", CodeMalformedJSON, "id"},
	} {
		_, e := DecodeReport(strings.NewReader(c.body), cfg)
		if e == nil || e.Code != c.code || e.Field != c.field || e.Status != 400 {
			t.Errorf("%s: got %+v, want 400 %s field %q", c.body, e, c.code, c.field)
		}
	}
	for _, c := range []struct{ body, code string }{
		{`null`, CodeWrongType}, {`{"a":1}`, CodeUnknownField}, {`{}{}`, CodeMalformedJSON}, {`"x"`, CodeWrongType},
	} {
		if e := DecodeEmpty(strings.NewReader(c.body)); e == nil || e.Code != c.code {
			t.Errorf("enrol body %s: got %+v, want %s", c.body, e, c.code)
		}
	}
	for _, ok := range []string{"", " \n", "{}", " { } "} {
		if e := DecodeEmpty(strings.NewReader(ok)); e != nil {
			t.Errorf("enrol body %q refused: %v", ok, e)
		}
	}
	for _, c := range []struct {
		body, code, field string
	}{
		{`{"method":"ldp-rr","Method":"x"}`, CodeUnknownField, "Method"},
		{`{"method":"ldp-rr","method":"dp-bias"}`, CodeDuplicateField, "method"},
		{`{"method":"ldp-rr","params":{"a":1,"a":2}}`, CodeDuplicateField, "params.a"},
		{`null`, CodeWrongType, ""},
	} {
		_, e := DecodeReleaseRequest(strings.NewReader(c.body))
		if e == nil || e.Code != c.code || e.Field != c.field {
			t.Errorf("release %s: got %+v, want %s field %q", c.body, e, c.code, c.field)
		}
	}
}

func TestCheckContentType(t *testing.T) {
	for _, c := range []struct {
		ct   string
		n    int64
		want bool
	}{
		{"application/json", 10, true}, {"application/json; charset=utf-8", 10, true}, {"Application/JSON", 10, true},
		{"", 0, true}, {"", 10, false}, {"", -1, false}, {"text/plain", 10, false}, {"application/json; charset=latin1", 10, false},
		{"application/x-www-form-urlencoded", 0, false}, {"application/json-seq", 3, false},
	} {
		e := CheckContentType(c.ct, c.n)
		if (e == nil) != c.want || (e != nil && (e.Status != 415 || e.Code != CodeMediaType)) {
			t.Errorf("Content-Type %q, length %d: got %+v, want ok=%v", c.ct, c.n, e, c.want)
		}
	}
}

// topNames lists the member names of a top-level object as written
// (duplicates kept), or ok = false when b is not one.
func topNames(b []byte) (names []string, ok bool) {
	d := jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, false
	}
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return nil, false
		}
		names = append(names, tok.String())
		if err := d.SkipValue(); err != nil {
			return nil, false
		}
	}
	return names, true
}

// FuzzDecodeStrict: whatever the strict decoder accepts is one object
// whose member names are exactly declared ones (same case), each at most
// once — checked by an independent token walk that allows duplicates.
func FuzzDecodeStrict(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"method":"ldp-rr","params":{"a":1}}`))
	f.Add([]byte(`{"method":"ldp-rr","METHOD":"x"}`))
	declared := map[string]bool{"method": true, "params": true, "epsilon": true, "delta": true, "seed": true}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req ReleaseRequest
		if e := decodeStrictBytes(b, &req); e != nil {
			if e.Status != 400 && e.Status != 413 || e.Code == "" || e.Message == "" {
				t.Fatalf("%q: error %+v", b, e)
			}
			return
		}
		names, ok := topNames(b)
		if !ok {
			t.Fatalf("%q accepted but is not one object", b)
		}
		seen := map[string]bool{}
		for _, n := range names {
			if !declared[n] || seen[n] {
				t.Fatalf("%q accepted with member %q (declared %v, repeated %v)", b, n, declared[n], seen[n])
			}
			seen[n] = true
		}
		var again ReleaseRequest
		if e := decodeStrictBytes(b, &again); e != nil || !reflect.DeepEqual(req, again) {
			t.Fatalf("%q: decoding is not deterministic", b)
		}
	})
}

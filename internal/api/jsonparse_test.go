package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// toAny converts a parsed value to what encoding/json (with UseNumber)
// decodes the same text to, for differential checks.
func toAny(v *jsonValue) any {
	switch v.kind {
	case kindNull:
		return nil
	case kindBool:
		return v.boolean
	case kindNumber:
		return json.Number(v.text)
	case kindString:
		return v.text
	case kindArray:
		out := make([]any, len(v.elems))
		for i, e := range v.elems {
			out[i] = toAny(e)
		}
		return out
	case kindObject:
		out := make(map[string]any, len(v.members))
		for _, m := range v.members {
			out[m.name.text] = toAny(m.value)
		}
		return out
	}
	panic("unknown kind")
}

// hasBadText reports whether any string in v is not valid Unicode text.
func hasBadText(v *jsonValue) bool {
	if v.badText != "" {
		return true
	}
	for _, e := range v.elems {
		if hasBadText(e) {
			return true
		}
	}
	for _, m := range v.members {
		if hasBadText(m.name) || hasBadText(m.value) {
			return true
		}
	}
	return false
}

func stdDecode(t testing.TB, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("encoding/json rejects %q: %v", data, err)
	}
	return v
}

func TestParseJSONAgreesWithEncodingJSON(t *testing.T) {
	inputs := []string{
		`null`, `true`, `false`, `0`, `-0`, `-1.5e+10`, `1E-2`, `123456789012345678901234567890`,
		`""`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u4e2d\ud83d\ude00"`, `"é中😀"`,
		`[]`, `[1,[2,[3]],{"a":[]}]`, `{}`, `{"a":1,"b":{"c":null},"d":[true,false]}`,
		" \t\n\r{ \"a\" : [ 1 , 2 ] } \n",
	}
	for _, in := range inputs {
		t.Run(in, func(t *testing.T) {
			v, err := parseJSON([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := toAny(v), stdDecode(t, []byte(in)); !reflect.DeepEqual(got, want) {
				t.Fatalf("parsed %#v, encoding/json %#v", got, want)
			}
		})
	}
}

func TestParseJSONRejects(t *testing.T) {
	tests := []struct{ in, msg string }{
		{``, "unexpected end of input"},
		{` `, "unexpected end of input"},
		{`{`, "expected a string naming an object member"},
		{`{"a"}`, "expected ':'"},
		{`{"a":1`, "unexpected end of input inside an object"},
		{`[1,]`, "unexpected character ']'"},
		{`[1 2]`, "expected ',' or ']'"},
		{`01`, "unexpected data after the top-level value"},
		{`1.`, "no digit after the decimal point"},
		{`1e`, "no digit in the exponent"},
		{`-`, "invalid number"},
		{`+1`, "unexpected character '+'"},
		{`.5`, "unexpected character '.'"},
		{`NaN`, "unexpected character 'N'"},
		{`tru`, "expected true"},
		{`nul`, "expected null"},
		{`"abc`, "unterminated string"},
		{`"\u12"`, `\u escape`},
		{`"\uZZZZ"`, "is not a hex digit"},
		{`"\a"`, `invalid escape \a`},
		{"\"\x01\"", "control character U+0001"},
		{`{"a":1,"a":2}`, `duplicate object key "a" (first at byte 1)`},
		{`[` + strings.Repeat(`[`, maxDepth) + strings.Repeat(`]`, maxDepth+1), "nested deeper than 32"},
		{`{} {}`, "unexpected data after the top-level value"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := parseJSON([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("parseJSON(%q) = %v, want an error with %q", tt.in, err, tt.msg)
			}
		})
	}
}

func TestParseJSONBadText(t *testing.T) {
	tests := []struct{ in, why string }{
		{"\"a\xffb\"", "invalid UTF-8 byte 0xFF at byte 2"},
		{`"\ud800"`, `lone UTF-16 surrogate \uD800 at byte 1`},
		{`"\ud800\u0041"`, `lone UTF-16 surrogate \uD800 at byte 1`},
		{`"\udfff"`, `lone UTF-16 surrogate \uDFFF at byte 1`},
	}
	for _, tt := range tests {
		v, err := parseJSON([]byte(tt.in))
		if err != nil {
			t.Fatalf("parseJSON(%q): %v", tt.in, err)
		}
		if v.badText != tt.why {
			t.Errorf("parseJSON(%q).badText = %q, want %q", tt.in, v.badText, tt.why)
		}
	}
	// A surrogate pair is fine, and the escape after a lone one is read.
	v, _ := parseJSON([]byte(`"\ud800\u0041"`))
	if !strings.HasSuffix(v.text, "A") {
		t.Errorf("text after a lone surrogate = %q, want it to end in A", v.text)
	}
}

package api

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"boxer"
)

// This file turns parsed JSON values into Go values for one named field,
// with an invalid_request error naming that field, the value's problem and
// what is allowed.

func fieldError(field, format string, args ...any) *boxer.Error {
	return boxer.Errorf(boxer.ECodeInvalidRequest, "%s: %s", field, fmt.Sprintf(format, args...))
}

// requestObject checks that root is an object whose every member is one of
// allowed, and returns the members by name. A name that differs from an
// allowed one only in case is called out: encoding/json would have accepted
// it, and the caller probably meant the other.
func requestObject(root *jsonValue, allowed ...string) (map[string]*jsonValue, *boxer.Error) {
	if root.kind != kindObject {
		return nil, boxer.Errorf(boxer.ECodeInvalidRequest, "the request body must be a JSON object, got %s", root.kind)
	}
	known := make(map[string]bool, len(allowed))
	for _, a := range allowed {
		known[a] = true
	}
	fields := make(map[string]*jsonValue, len(root.members))
	var unknown []string
	for _, m := range root.members {
		name := m.name.text
		if !known[name] {
			unknown = append(unknown, describeUnknown(name, allowed))
			continue
		}
		fields[name] = m.value
	}
	switch len(unknown) {
	case 0:
		return fields, nil
	case 1:
		return nil, boxer.Errorf(boxer.ECodeInvalidRequest, "unknown field %s; allowed fields: %s", unknown[0], strings.Join(allowed, ", "))
	default:
		return nil, boxer.Errorf(boxer.ECodeInvalidRequest, "unknown fields %s; allowed fields: %s", strings.Join(unknown, ", "), strings.Join(allowed, ", "))
	}
}

func describeUnknown(name string, allowed []string) string {
	for _, a := range allowed {
		if strings.EqualFold(a, name) {
			return fmt.Sprintf("%q (field names are case-sensitive: did you mean %q?)", name, a)
		}
	}
	return strconv.Quote(name)
}

// text reads a string field: not null, not another type, valid UTF-8
// without lone surrogates, and without NUL, which would cut the value short
// wherever it meets a C string (Python runs only the source before a NUL).
func text(field string, v *jsonValue) (string, *boxer.Error) {
	if v.kind != kindString {
		return "", fieldError(field, "must be a string, got %s", v.kind)
	}
	if v.badText != "" {
		return "", fieldError(field, "must be valid UTF-8 text: %s", v.badText)
	}
	if i := strings.IndexByte(v.text, 0); i >= 0 {
		return "", fieldError(field, "contains a NUL byte at byte %d of the value; NUL is not allowed", i)
	}
	return v.text, nil
}

// boolean reads a true or false.
func boolean(field string, v *jsonValue) (bool, *boxer.Error) {
	if v.kind != kindBool {
		return false, fieldError(field, "must be true or false, got %s", v.kind)
	}
	return v.boolean, nil
}

// integer reads a JSON number that is a whole number in [lo, hi]. As in JSON
// Schema, 512.0 is the integer 512; 512.5 is not an integer.
func integer(field string, v *jsonValue, lo, hi int64) (int64, *boxer.Error) {
	if v.kind != kindNumber {
		return 0, fieldError(field, "must be an integer from %d to %d, got %s", lo, hi, v.kind)
	}
	f, err := strconv.ParseFloat(v.text, 64)
	if err != nil && !isRangeErr(err) {
		return 0, fieldError(field, "must be an integer from %d to %d, got %s", lo, hi, v.text)
	}
	if f != math.Trunc(f) {
		return 0, fieldError(field, "must be an integer from %d to %d, got %s", lo, hi, v.text)
	}
	if f < float64(lo) || f > float64(hi) {
		return 0, fieldError(field, "%s is out of range; allowed: %d to %d", v.text, lo, hi)
	}
	return int64(f), nil
}

// number reads a JSON number in [lo, hi].
func number(field string, v *jsonValue, lo, hi float64) (float64, *boxer.Error) {
	if v.kind != kindNumber {
		return 0, fieldError(field, "must be a number from %g to %g, got %s", lo, hi, v.kind)
	}
	f, err := strconv.ParseFloat(v.text, 64)
	if err != nil && !isRangeErr(err) {
		return 0, fieldError(field, "must be a number from %g to %g, got %s", lo, hi, v.text)
	}
	if !(f >= lo && f <= hi) {
		return 0, fieldError(field, "%s is out of range; allowed: %g to %g", v.text, lo, hi)
	}
	return f, nil
}

// isRangeErr reports a literal too large or too small for a float64;
// ParseFloat still returns ±Inf or 0 then, which the range check rejects.
func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// textArray reads an array of strings of at most maxItems elements.
func textArray(field string, v *jsonValue, maxItems int) ([]string, *boxer.Error) {
	if v.kind != kindArray {
		return nil, fieldError(field, "must be an array of strings, got %s", v.kind)
	}
	if len(v.elems) > maxItems {
		return nil, fieldError(field, "has %d elements; at most %d are allowed", len(v.elems), maxItems)
	}
	out := make([]string, 0, len(v.elems))
	for i, e := range v.elems {
		s, err := text(fmt.Sprintf("%s[%d]", field, i), e)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

package api

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is a small, strict JSON reader. encoding/json is lenient in ways
// an API contract cannot afford: it matches keys case-insensitively, keeps
// the last of duplicate keys, replaces invalid UTF-8 and lone surrogates with
// U+FFFD without a word, and cannot tell null from missing in a typed
// struct. Reading the body into a tree first lets request.go check every one
// of those and name the field at fault.

// kind is a JSON value's type.
type kind uint8

const (
	kindNull kind = iota + 1
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k kind) String() string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "a boolean"
	case kindNumber:
		return "a number"
	case kindString:
		return "a string"
	case kindArray:
		return "an array"
	case kindObject:
		return "an object"
	}
	return "an unknown value"
}

// jsonValue is one parsed value.
type jsonValue struct {
	kind    kind
	off     int // byte offset of the value in the body
	boolean bool
	// text is a string's decoded contents, or a number's literal.
	text string
	// badText says why a string is not valid Unicode text (invalid UTF-8
	// or a lone surrogate escape); empty when it is. The string is parsed
	// anyway so that the caller can name the field it belongs to.
	badText string
	elems   []*jsonValue  // kindArray
	members []*jsonMember // kindObject, in document order, names unique
}

type jsonMember struct {
	name  *jsonValue // always kindString
	value *jsonValue
}

// syntaxError is a body that is not one well-formed JSON value.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("invalid JSON at byte %d: %s", e.off, e.msg) }

// maxDepth bounds nesting. The request schemas nest two levels; the bound
// only keeps a hostile body from using the stack.
const maxDepth = 32

// parseJSON reads exactly one JSON value from data, with nothing but white
// space after it. Objects with a repeated name are rejected.
func parseJSON(data []byte) (*jsonValue, error) {
	p := &parser{data: data}
	p.skipSpace()
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.errorf(p.pos, "unexpected data after the top-level value")
	}
	return v, nil
}

type parser struct {
	data  []byte
	pos   int
	depth int
}

func (p *parser) errorf(off int, format string, args ...any) error {
	return &syntaxError{off: off, msg: fmt.Sprintf(format, args...)}
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value() (*jsonValue, error) {
	if p.pos >= len(p.data) {
		return nil, p.errorf(p.pos, "unexpected end of input, expected a value")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.str()
	case c == '-' || isDigit(c):
		return p.number()
	case c == 't':
		return p.literal("true", &jsonValue{kind: kindBool, boolean: true})
	case c == 'f':
		return p.literal("false", &jsonValue{kind: kindBool})
	case c == 'n':
		return p.literal("null", &jsonValue{kind: kindNull})
	default:
		return nil, p.errorf(p.pos, "unexpected %s, expected a value", describeByte(p.data, p.pos))
	}
}

func (p *parser) literal(word string, v *jsonValue) (*jsonValue, error) {
	v.off = p.pos
	if len(p.data)-p.pos < len(word) || string(p.data[p.pos:p.pos+len(word)]) != word {
		return nil, p.errorf(p.pos, "invalid literal, expected %s", word)
	}
	p.pos += len(word)
	return v, nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errorf(p.pos, "nested deeper than %d levels", maxDepth)
	}
	return nil
}

func (p *parser) object() (*jsonValue, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	v := &jsonValue{kind: kindObject, off: p.pos}
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	seen := make(map[string]int)
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.errorf(p.pos, "unexpected %s, expected a string naming an object member", describeByte(p.data, p.pos))
		}
		name, err := p.str()
		if err != nil {
			return nil, err
		}
		if first, dup := seen[name.text]; dup {
			return nil, p.errorf(name.off, "duplicate object key %q (first at byte %d); keys must be unique", name.text, first)
		}
		seen[name.text] = name.off
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.errorf(p.pos, "unexpected %s, expected ':' after an object key", describeByte(p.data, p.pos))
		}
		p.pos++
		p.skipSpace()
		val, err := p.value()
		if err != nil {
			return nil, err
		}
		v.members = append(v.members, &jsonMember{name: name, value: val})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.errorf(p.pos, "unexpected end of input inside an object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return v, nil
		default:
			return nil, p.errorf(p.pos, "unexpected %s, expected ',' or '}' in an object", describeByte(p.data, p.pos))
		}
	}
}

func (p *parser) array() (*jsonValue, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	v := &jsonValue{kind: kindArray, off: p.pos}
	p.pos++ // '['
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return v, nil
	}
	for {
		p.skipSpace()
		elem, err := p.value()
		if err != nil {
			return nil, err
		}
		v.elems = append(v.elems, elem)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.errorf(p.pos, "unexpected end of input inside an array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return v, nil
		default:
			return nil, p.errorf(p.pos, "unexpected %s, expected ',' or ']' in an array", describeByte(p.data, p.pos))
		}
	}
}

// number checks the literal against RFC 8259's grammar and keeps its text;
// the field that wants it decides how to read it.
func (p *parser) number() (*jsonValue, error) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.data) && p.data[p.pos] == '0':
		p.pos++
	case p.pos < len(p.data) && isDigit(p.data[p.pos]):
		p.digits()
	default:
		return nil, p.errorf(start, "invalid number")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			return nil, p.errorf(start, "invalid number: no digit after the decimal point")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return nil, p.errorf(start, "invalid number: no digit in the exponent")
		}
	}
	return &jsonValue{kind: kindNumber, off: start, text: string(p.data[start:p.pos])}, nil
}

func (p *parser) digits() int {
	n := 0
	for p.pos < len(p.data) && isDigit(p.data[p.pos]) {
		p.pos++
		n++
	}
	return n
}

// str reads a string, decoding escapes. Invalid UTF-8 and lone surrogates do
// not stop it: they are noted in badText (the first one) for the field check.
func (p *parser) str() (*jsonValue, error) {
	v := &jsonValue{kind: kindString, off: p.pos}
	p.pos++ // opening quote
	buf := make([]byte, 0, 16)
	for {
		if p.pos >= len(p.data) {
			return nil, p.errorf(v.off, "unterminated string")
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			v.text = string(buf)
			return v, nil
		case c == '\\':
			var err error
			if buf, err = p.escape(buf, v); err != nil {
				return nil, err
			}
		case c < 0x20:
			return nil, p.errorf(p.pos, "control character U+%04X in a string must be escaped", c)
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && size == 1 {
				v.noteBad(fmt.Sprintf("invalid UTF-8 byte 0x%02X at byte %d", c, p.pos))
			}
			buf = append(buf, p.data[p.pos:p.pos+size]...)
			p.pos += size
		}
	}
}

func (v *jsonValue) noteBad(why string) {
	if v.badText == "" {
		v.badText = why
	}
}

// escape decodes one backslash escape at p.pos, appending to buf.
func (p *parser) escape(buf []byte, v *jsonValue) ([]byte, error) {
	start := p.pos
	if p.pos+1 >= len(p.data) {
		return nil, p.errorf(start, "unterminated escape")
	}
	c := p.data[p.pos+1]
	p.pos += 2
	switch c {
	case '"', '\\', '/':
		return append(buf, c), nil
	case 'b':
		return append(buf, '\b'), nil
	case 'f':
		return append(buf, '\f'), nil
	case 'n':
		return append(buf, '\n'), nil
	case 'r':
		return append(buf, '\r'), nil
	case 't':
		return append(buf, '\t'), nil
	case 'u':
	default:
		return nil, p.errorf(start, "invalid escape \\%c", c)
	}
	r, err := p.hex4(start)
	if err != nil {
		return nil, err
	}
	switch {
	case utf16.IsSurrogate(r) && r < 0xDC00:
		// A high surrogate must be followed by an escaped low surrogate.
		if p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
			save := p.pos
			p.pos += 2
			lo, err := p.hex4(save)
			if err != nil {
				return nil, err
			}
			if lo >= 0xDC00 && lo <= 0xDFFF {
				return utf8.AppendRune(buf, utf16.DecodeRune(r, lo)), nil
			}
			p.pos = save // not a pair: read the next escape on its own
		}
		v.noteBad(fmt.Sprintf("lone UTF-16 surrogate \\u%04X at byte %d", r, start))
		return utf8.AppendRune(buf, utf8.RuneError), nil
	case utf16.IsSurrogate(r):
		v.noteBad(fmt.Sprintf("lone UTF-16 surrogate \\u%04X at byte %d", r, start))
		return utf8.AppendRune(buf, utf8.RuneError), nil
	}
	return utf8.AppendRune(buf, r), nil
}

// hex4 reads the four hex digits of a \u escape that starts at escStart.
func (p *parser) hex4(escStart int) (rune, error) {
	if len(p.data)-p.pos < 4 {
		return 0, p.errorf(escStart, "truncated \\u escape")
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		var d byte
		switch {
		case isDigit(c):
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, p.errorf(escStart, "invalid \\u escape: %q is not a hex digit", c)
		}
		r = r<<4 | rune(d)
	}
	p.pos += 4
	return r, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// describeByte names what is at data[pos] for an error message.
func describeByte(data []byte, pos int) string {
	if pos >= len(data) {
		return "end of input"
	}
	c := data[pos]
	if c >= 0x20 && c < 0x7F {
		return fmt.Sprintf("character %q", c)
	}
	return fmt.Sprintf("byte 0x%02X", c)
}

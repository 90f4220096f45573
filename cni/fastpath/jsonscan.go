package fastpath

import (
	"errors"
	"unicode/utf8"
)

// A JSON reader small enough for this package (see wire.go).

var errSyntax = errors.New("fastpath: malformed JSON")

// scanner reads one JSON document with the grammar of RFC 8259, as
// strictly as encoding/json's validity check.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// next is the next byte past white space (0 at the end).
func (s *scanner) next() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) expect(c byte) error {
	if s.next() != c {
		return errSyntax
	}
	s.i++
	return nil
}

// end: nothing but white space is left.
func (s *scanner) end() error {
	if s.next() != 0 || s.i != len(s.b) {
		return errSyntax
	}
	return nil
}

// object calls field for each member of the object at s, its key
// unescaped, with s at the member's value; field must consume the value.
func (s *scanner) object(field func(key string) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.next() == '}' {
		s.i++
		return nil
	}
	for {
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		s.ws()
		if err := field(key); err != nil {
			return err
		}
		switch s.next() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return errSyntax
		}
	}
}

// value skips any value.
func (s *scanner) value() error {
	switch c := s.next(); {
	case c == '{':
		return s.object(func(string) error { return s.value() })
	case c == '[':
		s.i++
		if s.next() == ']' {
			s.i++
			return nil
		}
		for {
			if err := s.value(); err != nil {
				return err
			}
			switch s.next() {
			case ',':
				s.i++
			case ']':
				s.i++
				return nil
			default:
				return errSyntax
			}
		}
	case c == '"':
		_, err := s.str()
		return err
	case c == '-' || c >= '0' && c <= '9':
		_, err := s.number()
		return err
	default:
		_, _, err := s.literal()
		return err
	}
}

// literal reads true, false or null: isNull, or the boolean.
func (s *scanner) literal() (isNull, v bool, err error) {
	s.ws()
	for _, l := range []string{"true", "false", "null"} {
		if len(s.b)-s.i >= len(l) && string(s.b[s.i:s.i+len(l)]) == l {
			s.i += len(l)
			return l == "null", l == "true", nil
		}
	}
	return false, false, errSyntax
}

// number reads a number and returns its text.
func (s *scanner) number() (string, error) {
	s.ws()
	start := s.i
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case digits() == 0:
		return "", errSyntax
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return "", errSyntax
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return "", errSyntax
		}
	}
	return string(s.b[start:s.i]), nil
}

// str reads a string, unescaped (invalid UTF-8 and lone surrogates become
// U+FFFD, as encoding/json decodes them).
func (s *scanner) str() (string, error) {
	if err := s.expect('"'); err != nil {
		return "", err
	}
	var out []byte
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return string(out), nil
		case c < 0x20:
			return "", errSyntax
		case c == '\\':
			r, err := s.escape()
			if err != nil {
				return "", err
			}
			out = utf8.AppendRune(out, r)
		case c < utf8.RuneSelf:
			out = append(out, c)
			s.i++
		default:
			r, n := utf8.DecodeRune(s.b[s.i:])
			out = utf8.AppendRune(out, r) // RuneError for invalid bytes
			s.i += n
		}
	}
	return "", errSyntax
}

// escape reads the escape at s (a backslash and what follows).
func (s *scanner) escape() (rune, error) {
	if s.i+1 >= len(s.b) {
		return 0, errSyntax
	}
	c := s.b[s.i+1]
	s.i += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, err := s.hex4()
		if err != nil || r < 0xd800 || r >= 0xe000 {
			return r, err
		}
		// A surrogate: with a low one after it, the pair; else U+FFFD.
		if r < 0xdc00 && s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
			save := s.i
			s.i += 2
			lo, err := s.hex4()
			if err == nil && lo >= 0xdc00 && lo < 0xe000 {
				return 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00), nil
			}
			s.i = save
		}
		return utf8.RuneError, nil
	}
	return 0, errSyntax
}

func (s *scanner) hex4() (rune, error) {
	if len(s.b)-s.i < 4 {
		return 0, errSyntax
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, errSyntax
		}
	}
	s.i += 4
	return r, nil
}

// foldEq: a and b are equal ignoring ASCII case (encoding/json matches
// field names case-insensitively).
func foldEq(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

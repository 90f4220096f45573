// Package selector implements Calico's label selector language: a parser that produces a
// Selector, an evaluator over label sets, and a canonical text form.
//
// Grammar, loosest binding first:
//
//	a || b                      either side matches
//	a && b                      both sides match
//	!a                          negation (applies to the next term)
//	(a)                         grouping
//	k == "v"   k != "v"         equality; != also matches when k is absent
//	k in {"a", "b"}             k present with one of the values ({} never matches)
//	k not in {"a", "b"}         k absent or none of the values ({} always matches)
//	k contains "s"              substring / prefix / suffix; false when k is absent
//	k starts with "s"
//	k ends with "s"
//	has(k)   all()   global()
//
// The spellings and limits are Calico's: "not in", "starts with" and "ends with" may be
// written as one word (notin, startswith, endswith) or with any spaces and tabs between the
// words, and are printed as two words; a set may end with a comma; a function name is
// written against its "(". Only spaces and tabs separate tokens (a line break is an error).
// Values use single or double quotes and have no escapes. Label keys such as app or
// projectcalico.org/namespace are 1 to MaxLabelLength (512) of letters, digits and "._/-",
// in any order. An empty selector means all().
//
// global() in Calico matches only non-namespaced resources. Here labels carry no resource
// kind, so global() matches exactly when the label projectcalico.org/namespace is absent.
package selector

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
)

// Selector is a parsed selector expression. It is immutable and safe for concurrent use.
// A nil or zero Selector behaves as all().
type Selector struct {
	root node
	str  string // canonical text, computed once by Parse
}

// Labels is a source of labels, e.g. an endpoint's own labels layered over its profiles'.
type Labels interface {
	Get(key string) (string, bool)
}

// mapLabels adapts a plain map to Labels.
type mapLabels map[string]string

func (m mapLabels) Get(k string) (string, bool) {
	v, ok := m[k]
	return v, ok
}

// ParseError describes why a selector could not be parsed.
type ParseError struct {
	Pos   int    // byte offset in Input where the problem was found
	Msg   string // what was wrong
	Input string // the selector being parsed
}

// maxQuoted bounds how much of the input an error message repeats.
const maxQuoted = 120

func (e *ParseError) Error() string {
	in := e.Input
	if len(in) > maxQuoted {
		in = in[:maxQuoted] + "..."
	}
	return fmt.Sprintf("selector %q: %s at position %d", in, e.Msg, e.Pos)
}

// Parse parses a selector expression. "" (or only whitespace) means all(). Errors are
// *ParseError.
func Parse(s string) (*Selector, error) {
	root, err := parse(s)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	root.write(&b)
	return &Selector{root: root, str: b.String()}, nil
}

// MustParse is Parse that panics on error, for tests and constants.
func MustParse(s string) *Selector {
	sel, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return sel
}

// Evaluate reports whether a label set matches. A nil map is an empty label set.
func (s *Selector) Evaluate(labels map[string]string) bool {
	return s.EvaluateLabels(mapLabels(labels))
}

// EvaluateLabels reports whether the labels from l match.
func (s *Selector) EvaluateLabels(l Labels) bool {
	if s == nil || s.root == nil {
		return true
	}
	return s.root.eval(l)
}

// String returns the canonical form: single spaces around operators, double quotes (single
// only when the value contains a double quote), set values sorted and de-duplicated, nested
// && and || flattened, and only the parentheses that are needed. Parse(s.String()) yields an
// equal Selector.
func (s *Selector) String() string {
	if s == nil || s.root == nil {
		return "all()"
	}
	return s.str
}

// UniqueID returns a stable 28-character identifier of the selector's canonical form, made
// of [A-Za-z0-9_-] only (base64url of the first 21 bytes of SHA-256), for use in kernel object
// names such as ipsets.
func (s *Selector) UniqueID() string {
	sum := sha256.Sum256([]byte(s.String()))
	return base64.RawURLEncoding.EncodeToString(sum[:21])
}

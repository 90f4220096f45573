// Package selector implements Calico's label selector language.
package selector

import "errors"

// Selector is a parsed selector expression.
type Selector struct{ src string }

// Parse parses a selector expression. An empty string means all().
func Parse(s string) (*Selector, error) {
	return nil, errors.New("selector: not implemented yet")
}

// Evaluate reports whether labels match the selector.
func (s *Selector) Evaluate(labels map[string]string) bool { return false }

// String returns the canonical form of the selector.
func (s *Selector) String() string { return s.src }

package api

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/selector"
)

// TestMain stands in a rough syntax check for the selector parser while
// store/selector is unfinished, so this package's tests do not depend on it.
// Once selector.Parse accepts "all()" the real parser is used.
func TestMain(m *testing.M) {
	if _, err := selector.Parse("all()"); err != nil {
		parseSelector = roughSelectorCheck
	}
	os.Exit(m.Run())
}

// roughSelectorCheck rejects unbalanced brackets and quotes and expressions
// that start or end with an operator.
func roughSelectorCheck(s string) error {
	depth := 0
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
		case r == '(' || r == '{':
			depth++
		case r == ')' || r == '}':
			depth--
			if depth < 0 {
				return errors.New("unbalanced brackets")
			}
		}
	}
	if depth != 0 || quote != 0 {
		return errors.New("unbalanced brackets or quotes")
	}
	t := strings.TrimSpace(s)
	for _, op := range []string{"==", "!=", "&&", "||", "!", " in", "contains", "with"} {
		if strings.HasSuffix(t, op) {
			return errors.New("expression ends with an operator")
		}
	}
	for _, op := range []string{"==", "!=", "&&", "||"} {
		if strings.HasPrefix(t, op) {
			return errors.New("expression starts with an operator")
		}
	}
	return nil
}

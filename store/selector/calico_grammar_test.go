package selector

import (
	"errors"
	"strings"
	"testing"
)

// These tests pin the spellings and limits of Calico v3.32's selector language: the
// one-word operators, which whitespace separates tokens, which characters make a label key
// and how long it may be, and how function names meet their "(".

var (
	label512 = strings.Repeat("k", MaxLabelLength)
	label513 = strings.Repeat("k", MaxLabelLength+1)
)

func TestCalicoSpellingsAccepted(t *testing.T) {
	tests := []struct {
		in, canon   string
		match, miss map[string]string
	}{
		// One-word operators are printed as two words.
		{`a startswith "we"`, `a starts with "we"`, map[string]string{"a": "web"}, map[string]string{"a": "ewe"}},
		{`a endswith "eb"`, `a ends with "eb"`, map[string]string{"a": "web"}, map[string]string{"a": "ebw"}},
		{`a notin {"db"}`, `a not in {"db"}`, map[string]string{"a": "web"}, map[string]string{"a": "db"}},
		{`a startswith"we"`, `a starts with "we"`, map[string]string{"a": "web"}, noLabels},
		{`a endswith'eb'`, `a ends with "eb"`, map[string]string{"a": "web"}, noLabels},
		{`a notin{}`, `a not in {}`, noLabels, nil},
		{`!a notin {"x"}`, `!a not in {"x"}`, map[string]string{"a": "x"}, noLabels},
		// Any run of spaces and tabs may separate the two words.
		{"a starts \t with 'we'", `a starts with "we"`, map[string]string{"a": "web"}, noLabels},
		{"a ends\twith 'eb'", `a ends with "eb"`, map[string]string{"a": "web"}, noLabels},
		{"a not\t\tin {'db', 'x'}", `a not in {"db", "x"}`, noLabels, map[string]string{"a": "x"}},
		{"\ta == 'b'\t", `a == "b"`, map[string]string{"a": "b"}, noLabels},
		// The one-word spellings are still label keys where a key is expected.
		{`startswith startswith "x"`, `startswith starts with "x"`, map[string]string{"startswith": "xy"}, map[string]string{"startswith": "yx"}},
		{`notin notin {"x"}`, `notin not in {"x"}`, map[string]string{"notin": "y"}, map[string]string{"notin": "x"}},
		{`endswith == "e"`, `endswith == "e"`, map[string]string{"endswith": "e"}, noLabels},
		// A label key may start with any of its characters.
		{`_a == "b"`, `_a == "b"`, map[string]string{"_a": "b"}, map[string]string{"a": "b"}},
		{`-a in {"b"}`, `-a in {"b"}`, map[string]string{"-a": "b"}, noLabels},
		{`.a != "b"`, `.a != "b"`, map[string]string{".a": "c"}, map[string]string{".a": "b"}},
		{`has(/a)`, `has(/a)`, map[string]string{"/a": ""}, map[string]string{"a": ""}},
		{`has( _ )`, `has(_)`, map[string]string{"_": ""}, noLabels},
		// A set may end with a comma.
		{`a in {"x",}`, `a in {"x"}`, map[string]string{"a": "x"}, map[string]string{"a": "y"}},
		{`a notin {"y", "x", }`, `a not in {"x", "y"}`, map[string]string{"a": "z"}, map[string]string{"a": "x"}},
		// A label key of exactly MaxLabelLength characters.
		{label512 + ` == "v"`, label512 + ` == "v"`, map[string]string{label512: "v"}, map[string]string{label512[1:]: "v"}},
		{`has(` + label512 + `)`, `has(` + label512 + `)`, map[string]string{label512: ""}, noLabels},
	}
	for _, tt := range tests {
		sel, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%.60q): %v", tt.in, err)
			continue
		}
		if got := sel.String(); got != tt.canon {
			t.Errorf("Parse(%.60q).String() = %.60q, want %.60q", tt.in, got, tt.canon)
		}
		if !sel.Evaluate(tt.match) {
			t.Errorf("Parse(%.60q) does not match %v", tt.in, tt.match)
		}
		if tt.miss != nil && sel.Evaluate(tt.miss) {
			t.Errorf("Parse(%.60q) matches %v", tt.in, tt.miss)
		}
		if again, err := Parse(sel.String()); err != nil || again.String() != sel.String() {
			t.Errorf("canonical form %.60q of %.60q does not round-trip: %v", sel.String(), tt.in, err)
		}
	}
}

func TestCalicoSpellingsRefused(t *testing.T) {
	tests := []struct {
		in      string
		pos     int
		wantMsg string
	}{
		// Label keys longer than MaxLabelLength, wherever a key is expected.
		{label513 + ` == "v"`, 0, `is 513 characters long, more than the 512 allowed`},
		{`has(` + label513 + `)`, 4, `is 513 characters long, more than the 512 allowed`},
		{`a == "b" || ` + label513 + ` in {}`, 12, `label key "kkkkkkkkkkkkkkkkkkkk"... is 513 characters long`},
		// A function name is written against its "(".
		{`has (a)`, 4, `unexpected space between "has" and "("`},
		{"all\t()", 4, `unexpected space between "all" and "("`},
		{`!global ()`, 8, `unexpected space between "global" and "("`},
		// Only spaces and tabs separate tokens.
		{"has(a)\n", 6, `unexpected character 0x0a (only spaces and tabs may separate tokens)`},
		{"a ==\r\n'b'", 4, `unexpected character 0x0d`},
		{"a starts\nwith 'b'", 8, `only spaces and tabs`},
		{"\fhas(a)", 0, `unexpected character 0x0c`},
		// One-word spellings are whole words.
		{`a startswithx "b"`, 2, `after label "a" but found "startswithx"`},
		{`a starts_with "b"`, 2, `after label "a" but found "starts_with"`},
		{`a notin_ {"b"}`, 2, `after label "a" but found "notin_"`},
		{`a not inx {"b"}`, 6, `expected "in" after "not" but found "inx"`},
		{`a ends withx "b"`, 7, `expected "with" after "ends" but found "withx"`},
		{`a startswith`, 12, `expected a quoted string but found end of selector`},
		{`a notin "b"`, 8, `expected "{" but found quoted string`},
		// A set's trailing comma follows a value.
		{`a in {"x",,}`, 10, `expected a quoted string but found ","`},
	}
	for _, tt := range tests {
		sel, err := Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%.60q) = %.60q, want error", tt.in, sel)
			continue
		}
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%.60q) error %T is not *ParseError", tt.in, err)
			continue
		}
		if pe.Pos != tt.pos {
			t.Errorf("Parse(%.60q): Pos = %d, want %d (%v)", tt.in, pe.Pos, tt.pos, err)
		}
		if !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("Parse(%.60q) error:\n  %s\nwant it to contain\n  %s", tt.in, err, tt.wantMsg)
		}
	}
}

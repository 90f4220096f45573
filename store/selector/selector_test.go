package selector

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

var (
	noLabels = map[string]string{}
	web      = map[string]string{
		"app": "web", "tier": "frontend", "env": "prod",
		"projectcalico.org/namespace": "default", "app.kubernetes.io/name": "nginx",
	}
	hostLabels = map[string]string{"role": "host", "in": "x", "has": "y"}
)

func TestEvaluate(t *testing.T) {
	tests := []struct {
		sel    string
		labels map[string]string
		want   bool
	}{
		{"", noLabels, true},
		{"  \t ", web, true},
		{"all()", noLabels, true},
		{"all( )", web, true},
		{"!all()", web, false},
		{`app == "web"`, web, true},
		{`app == 'web'`, web, true},
		{`app=="web"`, web, true},
		{`app == "db"`, web, false},
		{`app == ""`, web, false},
		{`app == "web"`, noLabels, false},
		{`app != "db"`, web, true},
		{`app != "web"`, web, false},
		{`app != "web"`, noLabels, true}, // != matches an absent label
		{`has(app)`, web, true},
		{`has( app )`, noLabels, false},
		{`!has(app)`, noLabels, true},
		{`!has(app)`, web, false},
		{`has(app.kubernetes.io/name)`, web, true},
		{`projectcalico.org/namespace == "default"`, web, true},
		{`app in {"web", "db"}`, web, true},
		{`app in {'db','web'}`, web, true},
		{`app in {"db"}`, web, false},
		{`app in {"web"}`, noLabels, false},
		{`app in {}`, web, false},
		{`app in {}`, noLabels, false},
		{`app not in {"db"}`, web, true},
		{`app not in {"web", "db"}`, web, false},
		{`app not in {"web"}`, noLabels, true}, // not in matches an absent label
		{`app not in {}`, web, true},
		{`app not in {}`, noLabels, true},
		{`app contains "e"`, web, true},
		{`app contains ""`, web, true},
		{`app contains "x"`, web, false},
		{`app contains ""`, noLabels, false}, // false when absent
		{`app starts with "we"`, web, true},
		{`app starts with "eb"`, web, false},
		{`app starts with ""`, noLabels, false},
		{`app ends with "eb"`, web, true},
		{`app ends with "we"`, web, false},
		{`app ends with ""`, noLabels, false},
		{`global()`, web, false},
		{`global()`, hostLabels, true},
		{`global()`, noLabels, true},
		{`!global()`, web, true},
		// Keywords are ordinary label keys where a label is expected.
		{`in == "x"`, hostLabels, true},
		{`has == "y"`, hostLabels, true},
		{`has(has)`, hostLabels, true},
		{`all in {"z"}`, hostLabels, false},
		{`not not in {"a"}`, hostLabels, true},
		// Boolean structure and precedence.
		{`app == "web" && tier == "frontend"`, web, true},
		{`app == "web" && tier == "backend"`, web, false},
		{`app == "db" || tier == "frontend"`, web, true},
		{`app == "db" || tier == "backend"`, web, false},
		{`app == "db" && tier == "x" || env == "prod"`, web, true}, // (db && x) || prod
		{`env == "prod" || app == "db" && tier == "x"`, web, true}, // prod || (db && x)
		{`(env == "prod" || app == "db") && tier == "x"`, web, false},
		{`app == "db" && (tier == "x" || env == "prod")`, web, false},
		{`!app == "web"`, web, false}, // ! binds to the next term only
		{`!app == "db" && has(tier)`, web, true},
		{`!(app == "db" || has(tier))`, web, false},
		{`!!has(app)`, web, true},
		{`!(!(has(app)))`, web, true},
		{`((((has(app)))))`, web, true},
		{`has(a) || has(b) || has(app)`, web, true},
		{`has(app) && has(tier) && !has(x) && env in {"prod"}`, web, true},
	}
	for _, tt := range tests {
		sel, err := Parse(tt.sel)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.sel, err)
			continue
		}
		if got := sel.Evaluate(tt.labels); got != tt.want {
			t.Errorf("Parse(%q).Evaluate(%v) = %v, want %v", tt.sel, tt.labels, got, tt.want)
		}
		if got := sel.EvaluateLabels(mapLabels(tt.labels)); got != tt.want {
			t.Errorf("Parse(%q).EvaluateLabels(%v) = %v, want %v", tt.sel, tt.labels, got, tt.want)
		}
		// The canonical form means the same thing.
		again := MustParse(sel.String())
		if got := again.Evaluate(tt.labels); got != tt.want {
			t.Errorf("Parse(%q) (from %q).Evaluate = %v, want %v", sel.String(), tt.sel, got, tt.want)
		}
	}
}

func TestNilAndZeroSelectorMatchAll(t *testing.T) {
	var nilSel *Selector
	if !nilSel.Evaluate(web) || nilSel.String() != "all()" {
		t.Errorf("nil selector: Evaluate=%v String=%q, want true, all()", nilSel.Evaluate(web), nilSel.String())
	}
	if zero := (&Selector{}); !zero.Evaluate(nil) || zero.String() != "all()" {
		t.Errorf("zero selector should behave as all()")
	}
}

// layered is a Labels source whose first layer wins, like endpoint labels over profile labels.
type layered []map[string]string

func (l layered) Get(k string) (string, bool) {
	for _, m := range l {
		if v, ok := m[k]; ok {
			return v, true
		}
	}
	return "", false
}

func TestEvaluateLabels(t *testing.T) {
	l := layered{{"app": "web"}, {"app": "profile", "team": "a"}}
	sel := MustParse(`app == "web" && team == "a"`)
	if !sel.EvaluateLabels(l) {
		t.Errorf("%s should match layered labels", sel)
	}
	if MustParse(`app == "profile"`).EvaluateLabels(l) {
		t.Errorf("endpoint label should shadow profile label")
	}
}

func TestString(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, `all()`},
		{`all()`, `all()`},
		{` global( ) `, `global()`},
		{`a=='b'`, `a == "b"`},
		{`a  !=	"b"`, `a != "b"`},
		{`a == 'say "hi"'`, `a == 'say "hi"'`},
		{`a == "it's"`, `a == "it's"`},
		{`has( a )`, `has(a)`},
		{`!has(a)`, `!has(a)`},
		{`! ( has(a) )`, `!has(a)`},
		{`!a == "b"`, `!a == "b"`},
		{`!(a == "b")`, `!a == "b"`},
		{`!!(a in {"b"})`, `!!a in {"b"}`},
		{`!(!a starts with "b")`, `!!a starts with "b"`},
		{`a in {'y','x', "y"}`, `a in {"x", "y"}`},
		{`a in{}`, `a in {}`},
		{`a not   in {"b"}`, `a not in {"b"}`},
		{`a contains'x'`, `a contains "x"`},
		{`a starts  with "x"`, `a starts with "x"`},
		{`a ends with "x"`, `a ends with "x"`},
		{`(a == "b")`, `a == "b"`},
		{`a == "b" && has(c)`, `a == "b" && has(c)`},
		{`(a == "b" && (has(c) && has(d)))`, `a == "b" && has(c) && has(d)`},
		{`has(a) || (has(b) || has(c))`, `has(a) || has(b) || has(c)`},
		{`has(a) || has(b) && has(c)`, `has(a) || has(b) && has(c)`},
		{`(has(a) || has(b)) && has(c)`, `(has(a) || has(b)) && has(c)`},
		{`!(has(a) && has(b))`, `!(has(a) && has(b))`},
		{`x.io/k-1_2 == "v"`, `x.io/k-1_2 == "v"`},
	}
	for _, tt := range tests {
		sel, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if got := sel.String(); got != tt.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
		again, err := Parse(sel.String())
		if err != nil {
			t.Errorf("Parse(%q) (canonical of %q): %v", sel.String(), tt.in, err)
			continue
		}
		if !reflect.DeepEqual(again, sel) {
			t.Errorf("Parse(String()) of %q differs: %#v vs %#v", tt.in, again, sel)
		}
	}
}

func TestStringIgnoresSpacingAndQuotes(t *testing.T) {
	variants := []string{
		`app == "web" && (tier in {"a", "b"} || !has(x))`,
		`app=='web'&&(tier in{'b','a'}||!has(x))`,
		"\t app ==\t\"web\"  &&  ( tier  in { \"a\" ,'b' }  ||  ! has( x ) ) \t",
		`(app == "web") && ((tier in {"a", "b", "a"}) || (!has(x)))`,
	}
	first := MustParse(variants[0])
	for _, v := range variants[1:] {
		sel := MustParse(v)
		if sel.String() != first.String() || sel.UniqueID() != first.UniqueID() {
			t.Errorf("Parse(%q) = %q (%s), want %q (%s)", v, sel, sel.UniqueID(), first, first.UniqueID())
		}
	}
}

func TestUniqueID(t *testing.T) {
	valid := regexp.MustCompile(`^[A-Za-z0-9_-]{28}$`)
	a, b := MustParse(`has(a)`), MustParse(`has(b)`)
	for _, sel := range []*Selector{a, b, MustParse("")} {
		if id := sel.UniqueID(); !valid.MatchString(id) {
			t.Errorf("UniqueID of %q = %q, want 28 chars of [A-Za-z0-9_-]", sel, id)
		}
	}
	if a.UniqueID() == b.UniqueID() {
		t.Errorf("different selectors share UniqueID %q", a.UniqueID())
	}
	if a.UniqueID() != MustParse(` has( a ) `).UniqueID() {
		t.Errorf("UniqueID not stable across spacing")
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in      string
		pos     int
		wantMsg string // substring of Error()
	}{
		{`a ==`, 4, `selector "a ==": expected a quoted string but found end of selector at position 4`},
		{`a == `, 5, `selector "a == ": expected a quoted string but found end of selector at position 5`},
		{`has(`, 4, `expected a label key but found end of selector at position 4`},
		{`has(a`, 5, `expected ")" but found end of selector`},
		{`has("a")`, 4, `expected a label key but found quoted string`},
		{`a in {"x"`, 9, `expected "," or "}" but found end of selector at position 9`},
		{`a in {"x",,}`, 10, `expected a quoted string but found ","`},
		{`a in {,}`, 6, `expected a quoted string but found ","`},
		{`a in {"x" "y"}`, 10, `expected "," or "}" but found quoted string`},
		{`a in ("x")`, 5, `expected "{" but found "("`},
		{`a = "b"`, 2, `unexpected "=" (did you mean "=="?) at position 2`},
		{`&& b`, 0, `expected a label, has(), all(), global(), "!" or "(" but found "&&" at position 0`},
		{`a == "b`, 5, `unterminated string (missing closing ") at position 5`},
		{`a == 'b`, 5, `unterminated string (missing closing ') at position 5`},
		{`a`, 1, `expected an operator (==, !=, in, not in, contains, starts with, ends with) after label "a"`},
		{`a is "b"`, 2, `after label "a" but found "is"`},
		{`a not "b"`, 6, `expected "in" after "not"`},
		{`a starts "b"`, 9, `expected "with" after "starts"`},
		{`a ends by "b"`, 7, `expected "with" after "ends" but found "by"`},
		{`a == b`, 5, `expected a quoted string but found "b"`},
		{`has(a) has(b)`, 7, `expected "&&", "||" or end of selector but found "has"`},
		{`has(a) &`, 7, `did you mean "&&"?`},
		{`has(a) | has(b)`, 7, `did you mean "||"?`},
		{`(has(a)`, 7, `expected ")" to close "(" at position 0 but found end of selector`},
		{`has(a))`, 6, `expected "&&", "||" or end of selector but found ")"`},
		{`foo()`, 0, `unknown function "foo"`},
		{`all(x)`, 4, `expected ")" but found "x"`},
		{`!`, 1, `expected a label`},
		{`has(a) &&`, 9, `expected a label`},
		{`# == "b"`, 0, `unexpected character '#'`},
		{`a == "b" # c`, 9, `unexpected character '#'`},
		{"a == \"b\" \x00", 9, `unexpected character 0x00`},
		{`()`, 1, `expected a label`},
	}
	for _, tt := range tests {
		sel, err := Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) = %q, want error", tt.in, sel)
			continue
		}
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) error %T is not *ParseError", tt.in, err)
			continue
		}
		if pe.Pos != tt.pos || pe.Input != tt.in {
			t.Errorf("Parse(%q): Pos=%d Input=%q, want %d", tt.in, pe.Pos, pe.Input, tt.pos)
		}
		if !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("Parse(%q) error:\n  %s\nwant it to contain\n  %s", tt.in, err, tt.wantMsg)
		}
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("MustParse of a bad selector did not panic")
		}
	}()
	MustParse("a ==")
}

func TestLimits(t *testing.T) {
	ok := strings.Repeat("(", MaxDepth) + "has(a)" + strings.Repeat(")", MaxDepth)
	if _, err := Parse(ok); err != nil {
		t.Errorf("nesting %d deep: %v", MaxDepth, err)
	}
	// The canonical form is never nested deeper than the input, so it parses again.
	for _, in := range []string{
		strings.Repeat("!", MaxDepth) + `a == "b"`,
		strings.Repeat("!(", MaxDepth/2-1) + `(has(a) || has(b)) && has(c)` + strings.Repeat(")", MaxDepth/2-1),
	} {
		if _, err := Parse(MustParse(in).String()); err != nil {
			t.Errorf("canonical form of a %d-deep selector: %v", MaxDepth, err)
		}
	}
	for _, in := range []string{
		strings.Repeat("(", MaxDepth+1) + "has(a)" + strings.Repeat(")", MaxDepth+1),
		strings.Repeat("!", MaxDepth+1) + "has(a)",
		strings.Repeat("(", 50000),
		strings.Repeat("!(", 20000),
	} {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), "nested more than 100 levels deep") {
			t.Errorf("deep nesting (%d bytes): err = %v, want nesting error", len(in), err)
		}
		if len(err.Error()) > 300 {
			t.Errorf("error message not truncated: %d bytes", len(err.Error()))
		}
	}
	// Long but flat selectors are fine up to MaxLength.
	long := strings.Repeat(`has(a) || `, MaxLength/10-1) + "has(b)"
	if sel, err := Parse(long); err != nil || !sel.Evaluate(map[string]string{"b": ""}) {
		t.Errorf("flat selector of %d bytes: %v", len(long), err)
	}
	if _, err := Parse(long + strings.Repeat(" ", MaxLength)); err == nil ||
		!strings.Contains(err.Error(), "longer than 65536 bytes") {
		t.Errorf("oversized selector: err = %v, want length error", err)
	}
}

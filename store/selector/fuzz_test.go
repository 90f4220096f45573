package selector

import (
	"strings"
	"testing"
)

// fuzzLabels are the fixed label sets the fuzz target evaluates selectors against.
var fuzzLabels = []map[string]string{
	nil,
	{"a": "b"},
	{"a": "", "b": "x", "c": "abc"},
	{"app": "web", "tier": "frontend", "projectcalico.org/namespace": "default"},
	{"in": "in", "has": "all()", "not": "'", "x.io/y": "\""},
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", " ", "all()", "global()", `a == "b"`, `a != 'b'`, `has(a)`, `!has(a)`,
		`a in {"x", 'y'}`, `a not in {}`, `a contains "c"`, `a starts with "b"`, `a ends with ""`,
		`a == "b" && has(c) || !(d in {"e"})`, `((a == "b"))`, `!!all()`, `in in {'"'}`,
		`a == 'say "hi"'`, `x.io/k == "v" && !global()`, `!(a == "b" || !(c && d))`,
		`a startswith "b"`, "a ends\twith 'c'", `a notin {"x",}`, `_a in {}`, `notin notin {}`,
		strings.Repeat("k", MaxLabelLength) + ` == "v"`,
		// Invalid.
		`a ==`, `has(`, `a in {"x"`, `a = "b"`, `&& b`, `a == "b`, `(((`, `a in {"x",}`, `!`,
		"a == \"b\" \x00", `foo()`, `a starts "b"`, `has (a)`, "has(a)\n", `a notinx {}`,
		strings.Repeat("k", MaxLabelLength+1) + ` == "v"`,
		// At the depth limit: the canonical form must not add nesting.
		strings.Repeat("!", MaxDepth) + `a == "b"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		sel, err := Parse(in)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("Parse(%q) error %T is not *ParseError", in, err)
			}
			_ = err.Error()
			return
		}
		canon := sel.String()
		again, err := Parse(canon)
		if err != nil {
			t.Fatalf("Parse(%q) ok but canonical %q fails: %v", in, canon, err)
		}
		if again.String() != canon {
			t.Fatalf("canonical form not stable: %q -> %q -> %q", in, canon, again.String())
		}
		if again.UniqueID() != sel.UniqueID() {
			t.Fatalf("UniqueID differs for %q", in)
		}
		for _, l := range fuzzLabels {
			if a, b := sel.Evaluate(l), again.Evaluate(l); a != b {
				t.Fatalf("%q and canonical %q disagree on %v: %v vs %v", in, canon, l, a, b)
			}
		}
	})
}

func BenchmarkEvaluate(b *testing.B) {
	sel := MustParse(`projectcalico.org/namespace == "default" && app in {"api", "db", "web"} && ` +
		`!has(quarantine) && (tier starts with "front" || role != "batch")`)
	labels := map[string]string{
		"projectcalico.org/namespace": "default", "app": "web", "tier": "frontend",
		"app.kubernetes.io/name": "nginx", "pod-template-hash": "5d8f9c7b6",
	}
	if !sel.Evaluate(labels) {
		b.Fatal("benchmark selector should match")
	}
	b.ReportAllocs()
	for b.Loop() {
		sel.Evaluate(labels)
	}
}

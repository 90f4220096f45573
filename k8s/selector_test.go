package k8s

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/selector"
)

func TestLabelSelectorToCalico(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      *LabelSelector
		want    string // when wantErr is ""
		wantErr string
	}{
		{name: "nil is no restriction", in: nil, want: ""},
		{name: "empty selects all", in: &LabelSelector{}, want: "all()"},
		{name: "empty maps select all", in: &LabelSelector{MatchLabels: map[string]string{}, MatchExpressions: []LabelSelectorRequirement{}}, want: "all()"},
		{name: "matchLabels sorted by key",
			in:   &LabelSelector{MatchLabels: map[string]string{"tier": "fe", "app.kubernetes.io/name": "web", "a": ""}},
			want: "a == '' && app.kubernetes.io/name == 'web' && tier == 'fe'"},
		{name: "In", in: &LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "env", Operator: OpIn, Values: []string{"prod", "stage"}}}},
			want: "env in { 'prod', 'stage' }"},
		{name: "NotIn", in: &LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "env", Operator: OpNotIn, Values: []string{"dev"}}}},
			want: "env not in { 'dev' }"},
		{name: "Exists", in: &LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "x.io/y", Operator: OpExists}}},
			want: "has(x.io/y)"},
		{name: "DoesNotExist", in: &LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "pci", Operator: OpDoesNotExist}}},
			want: "! has(pci)"},
		{name: "labels first, then expressions in order",
			in: &LabelSelector{MatchLabels: map[string]string{"z": "1"}, MatchExpressions: []LabelSelectorRequirement{
				{Key: "b", Operator: OpDoesNotExist}, {Key: "a", Operator: OpExists}}},
			want: "z == '1' && ! has(b) && has(a)"},
		{name: "keys that are selector keywords", in: &LabelSelector{MatchLabels: map[string]string{"in": "not", "has": "all"}},
			want: "has == 'all' && in == 'not'"},
		{name: "single quote in a value is double-quoted", in: &LabelSelector{MatchLabels: map[string]string{"a": "it's"}},
			want: `a == "it's"`},
		{name: "double quote in a value stays single-quoted",
			in:   &LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "a", Operator: OpIn, Values: []string{`say "hi"`, "it's"}}}},
			want: `a in { 'say "hi"', "it's" }`},
		{name: "both quotes", in: &LabelSelector{MatchLabels: map[string]string{"a": `'"`}}, wantErr: "both quote characters"},
		{name: "both quotes in a set", in: &LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "a", Operator: OpNotIn, Values: []string{"x", `'"`}}}},
			wantErr: "matchExpressions[0]: values[1]"},
		{name: "empty key", in: &LabelSelector{MatchLabels: map[string]string{"": "x"}}, wantErr: "empty label key"},
		{name: "key with space", in: &LabelSelector{MatchLabels: map[string]string{"a b": "x"}}, wantErr: `"a b" cannot be used`},
		{name: "key starting with a dot", in: &LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: ".a", Operator: OpExists}}}, wantErr: "cannot be used"},
		{name: "key with selector syntax", in: &LabelSelector{MatchLabels: map[string]string{"a)||(b": "x"}}, wantErr: "cannot be used"},
		{name: "unknown operator", in: &LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "a", Operator: "Gt", Values: []string{"1"}}}}, wantErr: `unknown operator "Gt"`},
		{name: "In without values", in: &LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "a", Operator: OpIn}}}, wantErr: "at least one value"},
		{name: "Exists with values", in: &LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "a", Operator: OpExists, Values: []string{"x"}}}}, wantErr: "takes no values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LabelSelectorToCalico(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %q, %v; want error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
			if _, err := selector.Parse(got); err != nil {
				t.Errorf("result does not parse: %v", err)
			}
		})
	}
}

func TestPodSelectorToCalico(t *testing.T) {
	for _, tc := range []struct {
		in   *LabelSelector
		want string
	}{
		{nil, "projectcalico.org/orchestrator == 'k8s'"},
		{&LabelSelector{}, "projectcalico.org/orchestrator == 'k8s'"},
		{&LabelSelector{MatchLabels: map[string]string{"app": "web"}}, "projectcalico.org/orchestrator == 'k8s' && app == 'web'"},
	} {
		if got, err := podSelectorToCalico(tc.in); err != nil || got != tc.want {
			t.Errorf("podSelectorToCalico(%+v) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// k8sMatches is Kubernetes' meaning of a label selector, the reference the
// converted selectors are checked against.
func k8sMatches(s *LabelSelector, labels map[string]string) bool {
	for k, v := range s.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, e := range s.MatchExpressions {
		v, ok := labels[e.Key]
		in := ok && slices.Contains(e.Values, v)
		switch {
		case e.Operator == OpIn && !in, e.Operator == OpNotIn && in,
			e.Operator == OpExists && !ok, e.Operator == OpDoesNotExist && ok:
			return false
		}
	}
	return true
}

// TestLabelSelectorSemantics draws random selectors and label sets from a
// small alphabet (so they often overlap) and checks that Calico's
// evaluation of the converted selector agrees with Kubernetes' meaning.
func TestLabelSelectorSemantics(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := []string{"a", "b", "app.kubernetes.io/name", "in"}
	vals := []string{"", "x", "y", "it's", `"q"`}
	labelSet := func() map[string]string {
		m := map[string]string{}
		for _, k := range keys {
			if r.IntN(2) == 0 {
				m[k] = vals[r.IntN(len(vals))]
			}
		}
		return m
	}
	ops := []string{OpIn, OpNotIn, OpExists, OpDoesNotExist}
	matched := 0
	for range 2000 {
		s := &LabelSelector{MatchLabels: map[string]string{}}
		for range r.IntN(3) {
			s.MatchLabels[keys[r.IntN(len(keys))]] = vals[r.IntN(len(vals))]
		}
		for range r.IntN(3) {
			e := LabelSelectorRequirement{Key: keys[r.IntN(len(keys))], Operator: ops[r.IntN(len(ops))]}
			if e.Operator == OpIn || e.Operator == OpNotIn {
				for range 1 + r.IntN(3) {
					e.Values = append(e.Values, vals[r.IntN(len(vals))])
				}
			}
			s.MatchExpressions = append(s.MatchExpressions, e)
		}
		text, err := LabelSelectorToCalico(s)
		if err != nil {
			t.Fatalf("%+v: %v", s, err)
		}
		sel := selector.MustParse(text)
		for range 10 {
			l := labelSet()
			want := k8sMatches(s, l)
			if got := sel.Evaluate(l); got != want {
				t.Fatalf("selector %+v as %q on %v: got %v, Kubernetes says %v", s, text, l, got, want)
			}
			if want {
				matched++
			}
		}
	}
	if matched < 1000 {
		t.Errorf("only %d of 20000 evaluations matched; the test is not exercising matches", matched)
	}
}

// FuzzLabelValue: any value either converts to a selector that matches
// exactly that value, or is refused.
func FuzzLabelValue(f *testing.F) {
	for _, v := range []string{"", "web", "it's", `"`, `'"`, "a b", "{}", "\x00"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		text, err := LabelSelectorToCalico(&LabelSelector{MatchLabels: map[string]string{"k": v}})
		if err != nil {
			if !strings.Contains(v, "'") || !strings.Contains(v, `"`) {
				t.Fatalf("value %q refused: %v", v, err)
			}
			return
		}
		sel := selector.MustParse(text)
		if !sel.Evaluate(map[string]string{"k": v}) || sel.Evaluate(map[string]string{"k": v + "x"}) || sel.Evaluate(nil) {
			t.Fatalf("%q does not match exactly k=%q", text, v)
		}
	})
}

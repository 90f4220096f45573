package k8s

import (
	"fmt"
	"slices"
	"strings"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/selector"
)

// OrchestratorK8s is the orchestrator label value of Kubernetes pods.
const OrchestratorK8s = "k8s"

// k8sPodTerm restricts a pod selector to Kubernetes pods, as Calico does
// for every selector it derives from a podSelector (so a NetworkPolicy
// never selects a host endpoint or a plain-CNI workload).
const k8sPodTerm = api.LabelOrchestrator + " == '" + OrchestratorK8s + "'"

// LabelSelectorToCalico converts a Kubernetes label selector to Calico's
// selector language, in the text Calico's kube-controllers write:
// matchLabels sorted by key as k == 'v', then matchExpressions in order as
// k in { 'a', 'b' }, k not in { ... }, has(k) and ! has(k), joined by &&.
// A nil selector is "" (no restriction); an empty one is "all()".
//
// Values are single-quoted, or double-quoted when they contain a single
// quote; the language has no escapes, so a value with both kinds (never a
// valid Kubernetes label value) is an error, as is a key that is not a
// selector label key, an unknown operator, In/NotIn without values or
// Exists/DoesNotExist with values.
func LabelSelectorToCalico(s *LabelSelector) (string, error) {
	if s == nil {
		return "", nil
	}
	terms, err := selectorTerms(s)
	if err != nil {
		return "", err
	}
	if len(terms) == 0 {
		return "all()", nil
	}
	return joinTerms(terms)
}

// podSelectorToCalico converts a podSelector: Kubernetes pods, narrowed by
// s when s is not nil.
func podSelectorToCalico(s *LabelSelector) (string, error) {
	terms := []string{k8sPodTerm}
	if s != nil {
		more, err := selectorTerms(s)
		if err != nil {
			return "", err
		}
		terms = append(terms, more...)
	}
	return joinTerms(terms)
}

// joinTerms ANDs the terms and checks that the result parses.
func joinTerms(terms []string) (string, error) {
	out := strings.Join(terms, " && ")
	if _, err := selector.Parse(out); err != nil {
		return "", fmt.Errorf("converted selector does not parse: %w", err)
	}
	return out, nil
}

// selectorTerms are the terms of s in Calico's order: matchLabels by key,
// then matchExpressions as listed.
func selectorTerms(s *LabelSelector) ([]string, error) {
	var terms []string
	keys := make([]string, 0, len(s.MatchLabels))
	for k := range s.MatchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return nil, fmt.Errorf("matchLabels: %w", err)
		}
		v, err := quote(s.MatchLabels[k])
		if err != nil {
			return nil, fmt.Errorf("matchLabels[%s]: %w", k, err)
		}
		terms = append(terms, k+" == "+v)
	}
	for i, e := range s.MatchExpressions {
		t, err := expressionTerm(e)
		if err != nil {
			return nil, fmt.Errorf("matchExpressions[%d]: %w", i, err)
		}
		terms = append(terms, t)
	}
	return terms, nil
}

func expressionTerm(e LabelSelectorRequirement) (string, error) {
	if err := checkKey(e.Key); err != nil {
		return "", err
	}
	switch e.Operator {
	case OpIn, OpNotIn:
		if len(e.Values) == 0 {
			return "", fmt.Errorf("operator %s on %q needs at least one value", e.Operator, e.Key)
		}
		vals := make([]string, len(e.Values))
		for i, v := range e.Values {
			q, err := quote(v)
			if err != nil {
				return "", fmt.Errorf("values[%d]: %w", i, err)
			}
			vals[i] = q
		}
		op := " in { "
		if e.Operator == OpNotIn {
			op = " not in { "
		}
		return e.Key + op + strings.Join(vals, ", ") + " }", nil
	case OpExists, OpDoesNotExist:
		if len(e.Values) > 0 {
			return "", fmt.Errorf("operator %s on %q takes no values", e.Operator, e.Key)
		}
		if e.Operator == OpExists {
			return "has(" + e.Key + ")", nil
		}
		return "! has(" + e.Key + ")", nil
	}
	return "", fmt.Errorf("unknown operator %q on %q (want In, NotIn, Exists or DoesNotExist)", e.Operator, e.Key)
}

// checkKey accepts what the selector language reads as a label key: a
// letter or digit, then letters, digits and "._/-".
func checkKey(k string) error {
	for i := 0; i < len(k); i++ {
		c := k[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("._/-", rune(c))) {
			return fmt.Errorf("label key %q cannot be used in a selector", k)
		}
	}
	if k == "" {
		return fmt.Errorf("empty label key")
	}
	return nil
}

// quote puts v in single quotes, or double quotes when v has a single one.
func quote(v string) (string, error) {
	switch {
	case !strings.Contains(v, "'"):
		return "'" + v + "'", nil
	case !strings.Contains(v, `"`):
		return `"` + v + `"`, nil
	}
	return "", fmt.Errorf("value %q contains both quote characters, which a selector cannot express", v)
}

package iptables

import (
	"fmt"
	"reflect"
	"testing"
)

// After a restore, the cache of a changed chain is what savedRules makes,
// whether each rule is rendered again or taken from the kernel's copy.
func TestSavedRulesReusing(t *testing.T) {
	chain := func(n int, skip int) Chain {
		c := Chain{Name: "cali-from-wl-dispatch"}
		for i := range n {
			if i != skip {
				c.Rules = append(c.Rules, Rule{Match: fmt.Sprintf("-i cali%04d", i), Action: fmt.Sprintf("-g cali-fw-cali%04d", i)})
			}
		}
		return c
	}
	tb := NewTable("filter", 4, TableOptions{})
	tb.SetChains([]Chain{chain(250, 17)})
	have := tb.savedRules("cali-from-wl-dispatch")
	have[3].spec += " " // as iptables-save may print it: the kernel's copy is kept
	tb.SetChains([]Chain{chain(250, -1)})
	want := tb.savedRules("cali-from-wl-dispatch")
	got := tb.savedRulesReusing("cali-from-wl-dispatch", have)
	if got[3].spec != have[3].spec {
		t.Errorf("rule 3 rendered again (%q), want the kernel's copy", got[3].spec)
	}
	got[3].spec = want[3].spec
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reusing the kernel's rules gives %d rules unlike savedRules' %d", len(got), len(want))
	}
	if got := tb.savedRulesReusing("cali-from-wl-dispatch", nil); !reflect.DeepEqual(got, want) {
		t.Error("with no kernel rules: not savedRules")
	}
}

package iptables

import "testing"

// BenchmarkPlanOneChainChanged: the restore plan of a table of 1,000
// chains x 5 rules whose cached kernel state differs from the desired in
// one rule, as after a pod's event (no I/O: the plan alone). Before
// alignedAlready every chain built its maps to find nothing to do. Two
// lines: the changed rule and the FORWARD hook (no built-in chains in k).
// "all" plans every chain (a cache read back); "touched" the changed one,
// as Apply does from the cache of a successful Apply.
func BenchmarkPlanOneChainChanged(b *testing.B) {
	desired := benchChains(1000, 5)
	tb := NewTable("filter", 4, TableOptions{Hooks: map[string]string{"FORWARD": "cali-FORWARD"}})
	tb.SetChains(desired)
	k := &savedTable{chains: map[string][]savedRule{}}
	for _, c := range desired {
		k.chains[c.Name] = tb.savedRules(c.Name)
	}
	clear(tb.touched) // as a successful Apply leaves it
	desired[500].Rules[2].Action = "-j DROP"
	tb.SetChains(desired)
	for _, c := range []struct {
		name string
		only map[string]bool
	}{{"all", nil}, {"touched", tb.touched}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if lines, _, st := tb.plan(k, c.only); st.RulesWritten != 2 || len(lines) != 2 {
					b.Fatalf("plan: %d lines, stats %+v", len(lines), st)
				}
			}
		})
	}
}

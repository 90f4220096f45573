package iptables

import (
	"fmt"
	"testing"
)

func benchChains(chains, rules int) []Chain {
	cs := []Chain{{Name: "cali-FORWARD"}}
	for i := range chains {
		c := Chain{Name: fmt.Sprintf("cali-bench-%04d", i)}
		for j := range rules {
			c.Rules = append(c.Rules, Rule{
				Match:  fmt.Sprintf("-s 10.%d.%d.0/24 -p tcp -m tcp --dport %d", i/250, i%250, 1000+j),
				Action: "-j ACCEPT", Comment: "bench",
			})
		}
		cs = append(cs, c)
		cs[0].Rules = append(cs[0].Rules, Rule{Match: fmt.Sprintf("-i calibench%d", i), Action: "-j " + c.Name})
	}
	return cs
}

// BenchmarkTableApply programs 1,000 chains x 5 rules (plus a dispatch
// chain of 1,000 jumps and a FORWARD hook) in a network namespace, then
// measures: a full create from empty, an Apply with nothing to do (one
// iptables-save and the diff), and changing one rule (save, diff, one -R).
func BenchmarkTableApply(b *testing.B) {
	needKernel(b, "iptables-save", "iptables-restore")
	n := newNS(b)
	desired := benchChains(1000, 5)
	tb := NewTable("filter", 4, TableOptions{Hooks: map[string]string{"FORWARD": "cali-FORWARD"}})

	b.Run("create-1000x5", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			tb.SetChains(nil)
			applyIn(b, n, tb)
			tb.SetChains(desired)
			b.StartTimer()
			if st := applyIn(b, n, tb); st.ChainsCreated != 1001 || st.RulesWritten != 6001 {
				b.Fatalf("stats %+v", st)
			}
		}
	})
	tb.SetChains(desired)
	applyIn(b, n, tb)

	b.Run("no-change", func(b *testing.B) {
		for b.Loop() {
			if st := applyIn(b, n, tb); st.RestoreRan {
				b.Fatalf("stats %+v", st)
			}
		}
	})

	b.Run("change-one-rule", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			desired[500].Rules[2].Action = []string{"-j ACCEPT", "-j DROP"}[i%2]
			tb.SetChains(desired)
			if st := applyIn(b, n, tb); st.RulesWritten != 1 || st.RulesDeleted != 0 {
				b.Fatalf("stats %+v", st)
			}
		}
	})
}

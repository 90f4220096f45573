package calc_test

import (
	"fmt"
	"testing"
)

// BenchmarkDesiredOnePodMore: the calculation after one pod joins a node
// holding n (a namespace profile, a handful of policies selecting pods by
// label, as BenchmarkCNIPodCost's node), then leaves again; what the agent
// computes per CNI ADD and DEL. The ratio of 250 to 10 is what #25 wants
// flat.
func BenchmarkDesiredOnePodMore(b *testing.B) {
	for _, n := range []int{10, 250} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			ds := datastore{}
			ds.put(b, profile("kns.default", map[string]string{"ns": "default"}))
			ds.put(b, pool("p", "10.65.0.0/16", true))
			for i := range 5 {
				ds.put(b, np("default", fmt.Sprintf("pol-%d", i), order(float64(i)), fmt.Sprintf("app == 'a%d'", i),
					allowFrom(fmt.Sprintf("app == 'a%d'", (i+1)%5), ""), allow()))
			}
			for i := range n {
				ds.put(b, wep("default", fmt.Sprintf("pod%d", i), thisNode, fmt.Sprintf("cali%011d", i),
					map[string]string{"app": fmt.Sprintf("a%d", i%5)}, []string{fmt.Sprintf("10.65.%d.%d/32", i/250, i%250+1)}, "kns.default"))
			}
			s := fresh(b, ds, 0)
			s.Desired(false)
			more := ds.clone()
			more.put(b, wep("default", "extra", thisNode, "caliextra0000", map[string]string{"app": "a1"}, []string{"10.65.9.9/32"}, "kns.default"))
			add, del := diff(b, ds, more), diff(b, more, ds)
			for b.Loop() {
				applyAll(s, add)
				s.Desired(false)
				applyAll(s, del)
				s.Desired(false)
			}
		})
	}
}

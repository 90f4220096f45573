package iptables

import (
	"fmt"
	"github.com/calico-aio/calico-aio/internal/nstest"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
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
// measures SetChains plus Apply, as the dataplane loop calls them:
//
//   - create-1000x5: a first Apply over an empty table (read-back, restore);
//   - no-change-cached: nothing to do, with a valid cache (no command runs);
//   - change-one-rule-cached: one rule changed, with a valid cache (one
//     iptables-restore with one -R line, no iptables-save);
//   - change-one-rule-readback: the same after InvalidateCache (iptables-save,
//     diff, iptables-restore): the cost before the cache, and of a resync;
//   - resync-no-change: InvalidateCache and Apply with nothing to do (one
//     iptables-save and the diff), the periodic resync's cost.
func BenchmarkTableApply(b *testing.B) {
	nstest.NeedKernel(b, "iptables-save", "iptables-restore")
	n := nstest.NewNS(b)
	desired := benchChains(1000, 5)
	tb := NewTable("filter", 4, TableOptions{Hooks: map[string]string{"FORWARD": "cali-FORWARD"}})

	b.Run("create-1000x5", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			tb.SetChains(nil)
			applyIn(b, n, tb)
			tb.InvalidateCache() // a first Apply: read back, then write
			b.StartTimer()
			tb.SetChains(desired)
			if st := applyIn(b, n, tb); !st.ReadBack || st.ChainsCreated != 1001 || st.RulesWritten != 6001 {
				b.Fatalf("stats %+v", st)
			}
		}
	})
	tb.SetChains(desired)
	applyIn(b, n, tb)

	b.Run("no-change-cached", func(b *testing.B) {
		for b.Loop() {
			tb.SetChains(desired)
			if st := applyIn(b, n, tb); st.RestoreRan || st.ReadBack {
				b.Fatalf("stats %+v", st)
			}
		}
	})

	i := 0
	changeOne := func(b *testing.B, resync bool) {
		for b.Loop() {
			i++
			desired[500].Rules[2].Action = []string{"-j ACCEPT", "-j DROP"}[i%2]
			tb.SetChains(desired)
			if resync {
				tb.InvalidateCache()
			}
			if st := applyIn(b, n, tb); st.ReadBack != resync || st.RulesWritten != 1 || st.RulesDeleted != 0 {
				b.Fatalf("stats %+v", st)
			}
		}
	}
	b.Run("change-one-rule-cached", func(b *testing.B) { changeOne(b, false) })
	b.Run("change-one-rule-readback", func(b *testing.B) { changeOne(b, true) })

	b.Run("resync-no-change", func(b *testing.B) {
		for b.Loop() {
			tb.SetChains(desired)
			tb.InvalidateCache()
			if st := applyIn(b, n, tb); st.RestoreRan || !st.ReadBack {
				b.Fatalf("stats %+v", st)
			}
		}
	})
}

// BenchmarkIPSetsApply programs 1,000 sets of 20 members, then changes one
// member of one set: with a valid cache (one `ipset restore` of two lines)
// and after InvalidateCache (`ipset save` of all 20,000 members first).
func BenchmarkIPSetsApply(b *testing.B) {
	nstest.NeedKernel(b, "ipset")
	n := nstest.NewNS(b)
	s := NewIPSets(IPSetsOptions{IPVersion: 4})
	for i := range 1000 {
		if err := s.SetIPSet(fmt.Sprintf("cali40s:bench-%04d", i), SetTypeIP, FamilyInet,
			ips(fmt.Sprintf("10.%d", i/250), (i%250)*20, 20)); err != nil {
			b.Fatal(err)
		}
	}
	apply := func(b *testing.B) {
		if err := n.Do(func(ns.NetNS) error { return s.Apply() }); err != nil {
			b.Fatal(err)
		}
	}
	apply(b)
	i := 0
	changeOne := func(b *testing.B, resync bool) {
		for b.Loop() {
			i++
			old, new := "10.200.0.1", "10.200.0.2"
			if i%2 == 0 {
				old, new = new, old
			}
			if err := s.AddMembers("cali40s:bench-0500", []string{new}); err != nil {
				b.Fatal(err)
			}
			if err := s.RemoveMembers("cali40s:bench-0500", []string{old}); err != nil {
				b.Fatal(err)
			}
			if resync {
				s.InvalidateCache()
			}
			apply(b)
		}
	}
	b.Run("change-one-member-cached", func(b *testing.B) { changeOne(b, false) })
	b.Run("change-one-member-readback", func(b *testing.B) { changeOne(b, true) })
}

// cpuTime is the user plus system CPU time of this process and of its
// waited-for children: an exec'd ipset's CPU is not in ns/op when it runs
// on another core.
func cpuTime(b *testing.B) time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			b.Fatal(err)
		}
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return total
}

// BenchmarkIPSetsPodChurn is the ipset work of a CNI ADD and DEL (issue
// #25) on a node with 50 sets of 20 members: a pod's IP joins one set
// (Apply) then leaves it (Apply), with a valid cache. Each iteration does
// that twice, interleaved so that both see the same noise of a shared
// machine: once through `ipset -exist restore` (openNL nil, as before the
// netlink path) and once in-process over netlink. exec-cpu-ns/op and
// netlink-cpu-ns/op are the CPU (user + system) of the process and its
// children for each; ns/op is the wall time of both together.
func BenchmarkIPSetsPodChurn(b *testing.B) {
	nstest.NeedKernel(b, "ipset")
	n := nstest.NewNS(b)
	s := NewIPSets(IPSetsOptions{IPVersion: 4})
	for i := range 50 {
		if err := s.SetIPSet(fmt.Sprintf("cali40s:pods-%02d", i), SetTypeIP, FamilyInet,
			ips(fmt.Sprintf("10.%d", i), 0, 20)); err != nil {
			b.Fatal(err)
		}
	}
	apply := func() {
		if err := n.Do(func(ns.NetNS) error { return s.Apply() }); err != nil {
			b.Fatal(err)
		}
	}
	apply()
	const set, pod = "cali40s:pods-25", "10.66.0.1"
	// churn adds and removes the pod through open (nil: restore) and
	// returns the CPU it took.
	churn := func(open func() (memberConn, error)) time.Duration {
		s.openNL = open
		writes, start := s.writes, cpuTime(b)
		if err := s.AddMembers(set, []string{pod}); err != nil {
			b.Fatal(err)
		}
		apply()
		if err := s.RemoveMembers(set, []string{pod}); err != nil {
			b.Fatal(err)
		}
		apply()
		used := cpuTime(b) - start
		if ran := s.writes - writes; (open == nil) != (ran == 2) {
			b.Fatalf("%d ipset restores for an add and a del (netlink %v)", ran, open != nil)
		}
		return used
	}
	var execCPU, nlCPU time.Duration
	ops := 0
	for b.Loop() {
		execCPU += churn(nil)
		nlCPU += churn(openNetlink)
		ops++
	}
	b.ReportMetric(float64(execCPU)/float64(ops), "exec-cpu-ns/op")
	b.ReportMetric(float64(nlCPU)/float64(ops), "netlink-cpu-ns/op")
	b.ReportMetric(float64(execCPU)/float64(nlCPU), "exec/netlink")
}

package iptables

import (
	"errors"
	"github.com/calico-aio/calico-aio/internal/nstest"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
)

// TestTableKernelCache checks the cached view against the real binaries:
// changes run no iptables-save, drift is repaired only after
// InvalidateCache, and a restore that fails on a stale cache is retried
// from a fresh read.
func TestTableKernelCache(t *testing.T) {
	nstest.NeedKernel(t, "iptables-save", "iptables-restore", "iptables")
	n := nstest.NewNS(t)
	tb := NewTable("filter", 4, TableOptions{Hooks: kernelHooks, LockWait: true})
	l := &cmdLog{next: runCommand}
	tb.run = l.run
	cs := kernelChains()
	tb.SetChains(cs)
	if st := applyIn(t, n, tb); !st.ReadBack || l.count("-save") == 0 { // twice if --wait is rejected
		t.Fatalf("first apply: %+v %q", st, l.cmds)
	}
	good := func() {
		t.Helper()
		fresh := NewTable("filter", 4, TableOptions{Hooks: kernelHooks})
		fresh.SetChains(cs)
		if st := applyIn(t, n, fresh); st.RestoreRan {
			t.Fatalf("kernel not converged: a fresh Table wrote %+v", st)
		}
	}

	l.reset()
	cs[0].Rules[2].Match = "-s 10.1.0.0/16"
	tb.SetChains(cs)
	if st := applyIn(t, n, tb); st.ReadBack || st.RulesWritten != 1 || l.count("-save") != 0 || l.count("-restore") != 1 {
		t.Fatalf("one-rule change: %+v %q", st, l.cmds)
	}
	good()

	// A rule of ours deleted by hand is not seen until InvalidateCache.
	sh(t, n, "iptables", "-D", "cali-wl", "1")
	l.reset()
	if st := applyIn(t, n, tb); st.RestoreRan || len(l.cmds) != 0 {
		t.Fatalf("no-op apply: %+v %q", st, l.cmds)
	}
	cs[1].Rules[0].Match = "-p tcp -m tcp --dport 178"
	tb.SetChains(cs)
	if st := applyIn(t, n, tb); st.ReadBack || st.RulesWritten != 1 || l.count("-save") != 0 {
		t.Fatalf("change elsewhere: %+v %q", st, l.cmds)
	}
	if got := chainRules(saved(t, n, "iptables-save", "filter"), "cali-wl"); len(got) != 1 {
		t.Fatalf("cali-wl repaired without a read-back: %q", got)
	}
	tb.InvalidateCache()
	l.reset()
	// The hand-deleted rule 1 of cali-wl is inserted again; rule 2 stays.
	if st := applyIn(t, n, tb); !st.ReadBack || st.RulesWritten != 1 || l.count("-save") != 1 {
		t.Fatalf("resync: %+v %q", st, l.cmds)
	}
	good()

	// A chain of ours deleted by hand (with its hook): the cached restore
	// fails, and Apply repairs from a fresh read in the same call.
	sh(t, n, "iptables", "-D", "INPUT", "1")
	sh(t, n, "iptables", "-F", "cali-INPUT")
	sh(t, n, "iptables", "-X", "cali-INPUT")
	cs[1].Rules[0].Match = "-p tcp -m tcp --dport 179"
	tb.SetChains(cs)
	l.reset()
	if st := applyIn(t, n, tb); !st.StaleCache || !st.ReadBack || st.ChainsCreated != 1 || l.count("-save") != 1 {
		t.Fatalf("stale cache: %+v %q", st, l.cmds)
	}
	good()

	// A genuine restore error leaves the cache invalid.
	tb.SetChains(append(slices.Clone(cs), Chain{Name: "cali-bad", Rules: []Rule{{Match: "-m nosuchmatch"}}}))
	var err error
	_ = n.Do(func(ns.NetNS) error { _, err = tb.Apply(); return nil })
	var re *RestoreError
	if !errors.As(err, &re) || tb.cache != nil || !tb.Dirty() {
		t.Fatalf("want a RestoreError and no cache, got %v", err)
	}
	tb.SetChains(cs)
	l.reset()
	if st := applyIn(t, n, tb); !st.ReadBack || st.RestoreRan || l.count("-save") != 1 {
		t.Fatalf("after the error: %+v %q", st, l.cmds)
	}
	good()
}

// TestIPSetsKernelCache: with a valid cache, Apply runs one `ipset restore`
// holding just the changes and no `ipset save`; drift is seen only after
// InvalidateCache; a failed restore invalidates the cache.
func TestIPSetsKernelCache(t *testing.T) {
	nstest.NeedKernel(t, "ipset", "iptables")
	n := nstest.NewNS(t)
	const a, b = "cali40s:a", "cali40s:b"
	s := NewIPSets(IPSetsOptions{IPVersion: 4})
	l := &cmdLog{next: runCommand}
	s.run = l.run
	// Member changes through `ipset restore`, as for members the netlink
	// path cannot parse; TestIPSetsNetlinkKernel covers the netlink path.
	s.openNL = nil
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(want map[string][]string) {
		t.Helper()
		if got, _ := ipsetSave(t, n); !maps.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("sets %v\nwant %v", got, want)
		}
	}
	must(s.SetIPSet(a, SetTypeIP, FamilyInet, ips("10.0", 0, 20)))
	must(s.SetIPSet(b, SetTypeIP, FamilyInet, ips("10.1", 0, 20)))
	mustApplySets(t, n, s)
	if l.count(" save") != 1 || l.count(" restore") != 1 {
		t.Fatalf("first apply ran %q", l.cmds)
	}
	want := map[string][]string{a: slices.Sorted(slices.Values(ips("10.0", 0, 20))), b: slices.Sorted(slices.Values(ips("10.1", 0, 20)))}

	l.reset()
	mustApplySets(t, n, s)
	if len(l.cmds) != 0 {
		t.Fatalf("no-op apply ran %q", l.cmds)
	}
	must(s.AddMembers(a, []string{"10.0.9.9"}))
	must(s.RemoveMembers(a, []string{"10.0.0.1"}))
	mustApplySets(t, n, s)
	if l.count(" save") != 0 || l.count(" restore") != 1 ||
		l.last(" restore") != "add "+a+" 10.0.9.9\ndel "+a+" 10.0.0.1\n" {
		t.Fatalf("member change ran %q, input %q", l.cmds, l.last(" restore"))
	}
	want[a] = slices.Sorted(slices.Values(append(slices.DeleteFunc(want[a], func(m string) bool { return m == "10.0.0.1" }), "10.0.9.9")))
	check(want)

	// A member deleted by hand is not seen until InvalidateCache.
	sh(t, n, "ipset", "del", b, "10.1.0.5")
	l.reset()
	must(s.AddMembers(a, []string{"10.0.9.10"}))
	mustApplySets(t, n, s)
	if l.count(" save") != 0 || l.last(" restore") != "add "+a+" 10.0.9.10\n" {
		t.Fatalf("change ran %q, input %q", l.cmds, l.last(" restore"))
	}
	want[a] = slices.Sorted(slices.Values(append(want[a], "10.0.9.10")))
	if got, _ := ipsetSave(t, n); slices.Contains(got[b], "10.1.0.5") {
		t.Fatal("deleted member repaired without a read-back")
	}
	s.InvalidateCache()
	if !s.Dirty() {
		t.Fatal("InvalidateCache did not mark the driver dirty")
	}
	l.reset()
	mustApplySets(t, n, s)
	if l.count(" save") != 1 || l.last(" restore") != "add "+b+" 10.1.0.5\n" {
		t.Fatalf("resync ran %q, input %q", l.cmds, l.last(" restore"))
	}
	check(want)

	// A set destroyed by hand: the cached restore fails, and Apply
	// repairs from a fresh read in the same call.
	sh(t, n, "ipset", "destroy", b)
	must(s.AddMembers(b, []string{"10.1.9.9"}))
	want[b] = slices.Sorted(slices.Values(append(want[b], "10.1.9.9")))
	l.reset()
	mustApplySets(t, n, s)
	if l.count(" save") != 1 || l.count(" restore") != 2 {
		t.Fatalf("stale cache ran %q", l.cmds)
	}
	check(want)

	// A genuine failure (type change of a referenced set): the error is
	// returned, and the next Apply reads back.
	sh(t, n, "iptables", "-A", "INPUT", "-m", "set", "--match-set", a, "src", "-j", "ACCEPT")
	must(s.SetIPSet(a, SetTypeNet, FamilyInet, []string{"10.0.0.0/16"}))
	l.reset()
	if err := applySets(t, n, s); !errors.Is(err, ErrIPSetInUse) || s.cache != nil || !s.Dirty() {
		t.Fatalf("want ErrIPSetInUse and no cache, got %v", err)
	}
	if l.count(" save") != 1 { // the retry from a fresh read
		t.Fatalf("failed apply ran %q", l.cmds)
	}
	must(s.SetIPSet(a, SetTypeIP, FamilyInet, want[a]))
	l.reset()
	mustApplySets(t, n, s)
	if l.count(" save") != 1 || l.count(" restore") != 0 {
		t.Fatalf("apply after a failure ran %q", l.cmds)
	}
	check(want)
	if out := sh(t, n, "iptables-save", "-t", "filter"); !strings.Contains(out, "--match-set "+a+" src") {
		t.Fatalf("reference to %s lost:\n%s", a, out)
	}
}

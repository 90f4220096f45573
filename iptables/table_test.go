package iptables

import (
	"github.com/calico-aio/calico-aio/internal/nstest"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
)

// Rules are written in the form iptables-save prints them back in, so that
// the save text can be compared literally.
func kernelChains() []Chain {
	return []Chain{
		{Name: "cali-FORWARD", Rules: []Rule{
			{Match: "-i cali+", Action: "-j cali-wl"},
			{Match: "-o cali+", Action: "-j cali-wl", Comment: `to "wl" \ back`},
			{Match: "-s 10.0.0.0/8", Action: "-j ACCEPT"},
		}},
		{Name: "cali-INPUT", Rules: []Rule{{Match: "-p tcp -m tcp --dport 179", Action: "-j ACCEPT"}}},
		{Name: "cali-wl", Rules: []Rule{{Match: "-d 10.65.0.1/32", Action: "-j DROP"}, {Action: "-j RETURN"}}},
	}
}

var kernelHooks = map[string]string{"FORWARD": "cali-FORWARD", "INPUT": "cali-INPUT"}

// h is the hash comment of rule i of chain c in cs (or of the hook into c).
func h(cs []Chain, chain string, i int) string {
	for _, c := range cs {
		if c.Name == chain {
			return `-m comment --comment "cali:` + chainHashes(c)[i] + `"`
		}
	}
	return strings.TrimSuffix(hookText(chain, kernelHooks[chain]), " -j "+kernelHooks[chain])
}

// ruleHashes returns the hash of every rule of chain in a save text.
func ruleHashes(t *testing.T, save, chain string) []string {
	t.Helper()
	st, err := parseSave("filter", []byte("*filter\n"+save+"\nCOMMIT\n"))
	if err != nil {
		t.Fatal(err)
	}
	var hs []string
	for _, r := range st.chains[chain] {
		hs = append(hs, r.hash)
	}
	return hs
}

func TestTableKernelFilter(t *testing.T) {
	nstest.NeedKernel(t, "iptables-save", "iptables-restore", "iptables")
	n := nstest.NewNS(t)
	sh(t, n, "iptables", "-A", "FORWARD", "-s", "192.0.2.1", "-j", "DROP")
	sh(t, n, "iptables", "-N", "FOREIGN")
	sh(t, n, "iptables", "-A", "FOREIGN", "-j", "RETURN")

	cs := kernelChains()
	tb := NewTable("filter", 4, TableOptions{Hooks: kernelHooks, LockWait: true})
	tb.SetChains(cs)
	st := applyIn(t, n, tb)
	if !st.RestoreRan || st.ChainsCreated != 3 || st.RulesWritten != 8 || st.RulesDeleted != 0 {
		t.Fatalf("first apply: %+v", st)
	}
	want := strings.Join([]string{
		":INPUT ACCEPT", ":FORWARD ACCEPT", ":OUTPUT ACCEPT",
		":FOREIGN -", ":cali-FORWARD -", ":cali-INPUT -", ":cali-wl -",
		"-A INPUT " + h(cs, "INPUT", 0) + " -j cali-INPUT",
		"-A FORWARD " + h(cs, "FORWARD", 0) + " -j cali-FORWARD",
		"-A FORWARD -s 192.0.2.1/32 -j DROP",
		"-A FOREIGN -j RETURN",
		"-A cali-FORWARD -i cali+ " + h(cs, "cali-FORWARD", 0) + " -j cali-wl",
		"-A cali-FORWARD -o cali+ " + h(cs, "cali-FORWARD", 1) + ` -m comment --comment "to \"wl\" \\ back" -j cali-wl`,
		"-A cali-FORWARD -s 10.0.0.0/8 " + h(cs, "cali-FORWARD", 2) + " -j ACCEPT",
		"-A cali-INPUT -p tcp -m tcp --dport 179 " + h(cs, "cali-INPUT", 0) + " -j ACCEPT",
		"-A cali-wl -d 10.65.0.1/32 " + h(cs, "cali-wl", 0) + " -j DROP",
		"-A cali-wl " + h(cs, "cali-wl", 1) + " -j RETURN",
	}, "\n")
	converged := saved(t, n, "iptables-save", "filter")
	if converged != want {
		t.Fatalf("iptables-save:\n%s\nwant:\n%s", converged, want)
	}

	if st := applyIn(t, n, tb); st.RestoreRan {
		t.Fatalf("re-apply of the same state ran a restore: %+v", st)
	}
	restarted := NewTable("filter", 4, TableOptions{Hooks: kernelHooks})
	restarted.SetChains(kernelChains())
	if st := applyIn(t, n, restarted); st.RestoreRan {
		t.Fatalf("fresh Table over the same kernel state ran a restore: %+v", st)
	}

	t.Run("change one rule", func(t *testing.T) {
		before := ruleHashes(t, converged, "cali-FORWARD")
		cs[0].Rules[1].Match = "-o tap+"
		tb.SetChains(cs)
		st := applyIn(t, n, tb)
		if st.ReadBack || st.RulesWritten != 1 || st.RulesDeleted != 0 || st.ChainsCreated+st.ChainsDeleted != 0 {
			t.Fatalf("stats %+v", st)
		}
		got := saved(t, n, "iptables-save", "filter")
		after := ruleHashes(t, got, "cali-FORWARD")
		if after[0] != before[0] || after[2] != before[2] || after[1] == before[1] ||
			!strings.Contains(got, "-A cali-FORWARD -o tap+ "+h(cs, "cali-FORWARD", 1)) {
			t.Fatalf("hashes %q -> %q\n%s", before, after, got)
		}
	})

	t.Run("add and remove chains", func(t *testing.T) {
		cs = append(cs[:2], Chain{Name: "cali-new", Rules: []Rule{{Action: "-j DROP"}}})
		cs[0].Rules[0].Action = "-j cali-new"
		cs[0].Rules[1].Action = "-j cali-new"
		tb.SetChains(cs)
		st := applyIn(t, n, tb)
		if st.ChainsCreated != 1 || st.ChainsDeleted != 1 || st.RulesWritten != 3 {
			t.Fatalf("stats %+v", st)
		}
		got := saved(t, n, "iptables-save", "filter")
		if strings.Contains(got, "cali-wl") || !strings.Contains(got, ":cali-new -") {
			t.Fatalf("iptables-save:\n%s", got)
		}
	})

	t.Run("foreign rule above the hook", func(t *testing.T) {
		sh(t, n, "iptables", "-I", "FORWARD", "1", "-s", "192.0.2.2/32", "-j", "ACCEPT")
		if st := applyIn(t, n, tb); st.ReadBack || st.RestoreRan {
			t.Fatalf("cached Apply saw a foreign change: %+v", st)
		}
		tb.InvalidateCache()
		applyIn(t, n, tb)
		fwd := chainRules(saved(t, n, "iptables-save", "filter"), "FORWARD")
		want := []string{"-A FORWARD " + h(cs, "FORWARD", 0) + " -j cali-FORWARD",
			"-A FORWARD -s 192.0.2.2/32 -j ACCEPT", "-A FORWARD -s 192.0.2.1/32 -j DROP"}
		if !slices.Equal(fwd, want) {
			t.Fatalf("FORWARD:\n%s", strings.Join(fwd, "\n"))
		}
	})

	t.Run("repair manual deletions", func(t *testing.T) {
		good := saved(t, n, "iptables-save", "filter")
		sh(t, n, "iptables", "-D", "cali-FORWARD", "2")
		sh(t, n, "iptables", "-D", "INPUT", "1")
		tb.InvalidateCache()
		st := applyIn(t, n, tb)
		if st.RulesWritten != 2 || st.RulesDeleted != 0 { // rule 2 of cali-FORWARD inserted again, the hook
			t.Fatalf("stats %+v", st)
		}
		if got := saved(t, n, "iptables-save", "filter"); got != good {
			t.Fatalf("after repair:\n%s\nwant:\n%s", got, good)
		}
		// A second copy of the hook, further down, is removed.
		hook := strings.Fields(strings.TrimPrefix(hookText("FORWARD", "cali-FORWARD"), "-m comment --comment "))
		sh(t, n, "iptables", "-A", "FORWARD", "-m", "comment", "--comment", strings.Trim(hook[0], `"`), "-j", "cali-FORWARD")
		tb.InvalidateCache()
		st = applyIn(t, n, tb)
		if st.RulesDeleted != 2 || st.RulesWritten != 1 {
			t.Fatalf("duplicate hook: stats %+v", st)
		}
		if got := saved(t, n, "iptables-save", "filter"); got != good {
			t.Fatalf("after repair:\n%s\nwant:\n%s", got, good)
		}
	})

	t.Run("remove everything of ours", func(t *testing.T) {
		tb.SetChains(nil)
		st := applyIn(t, n, tb)
		if st.ChainsDeleted != 3 || st.RulesDeleted != 2 {
			t.Fatalf("stats %+v", st)
		}
		want := strings.Join([]string{":INPUT ACCEPT", ":FORWARD ACCEPT", ":OUTPUT ACCEPT", ":FOREIGN -",
			"-A FORWARD -s 192.0.2.2/32 -j ACCEPT", "-A FORWARD -s 192.0.2.1/32 -j DROP", "-A FOREIGN -j RETURN"}, "\n")
		if got := saved(t, n, "iptables-save", "filter"); got != want {
			t.Fatalf("iptables-save:\n%s\nwant:\n%s", got, want)
		}
	})
}

func chainRules(save, chain string) []string {
	var out []string
	for _, l := range strings.Split(save, "\n") {
		if strings.HasPrefix(l, "-A "+chain+" ") {
			out = append(out, l)
		}
	}
	return out
}

// TestTableKernelNatAndIPv6 programs the nat table (created lazily by the
// nft backend) and an ip6tables filter table, each in its own namespace.
func TestTableKernelNatAndIPv6(t *testing.T) {
	nstest.NeedKernel(t, "iptables-save", "iptables-restore", "ip6tables-save", "ip6tables-restore")
	for _, tc := range []struct {
		name, table, save string
		ipVersion         int
		hooks             map[string]string
		chains            []Chain
	}{
		{"nat", "nat", "iptables-save", 4,
			map[string]string{"PREROUTING": "cali-PREROUTING", "POSTROUTING": "cali-POSTROUTING"},
			[]Chain{
				{Name: "cali-PREROUTING", Rules: []Rule{{Match: "-d 10.96.0.10/32 -p udp -m udp --dport 53",
					Action: "-j DNAT --to-destination 10.65.0.5:53"}}},
				{Name: "cali-POSTROUTING", Rules: []Rule{{Match: "-s 10.65.0.0/16 ! -d 10.65.0.0/16", Action: "-j MASQUERADE"}}},
			}},
		{"ipv6 filter", "filter", "ip6tables-save", 6,
			map[string]string{"FORWARD": "cali-FORWARD"},
			[]Chain{{Name: "cali-FORWARD", Rules: []Rule{
				{Match: "-s fd00::/64", Action: "-j ACCEPT"},
				{Match: "-p ipv6-icmp -m icmp6 --icmpv6-type 128", Action: "-j ACCEPT", Comment: "ping"},
			}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := nstest.NewNS(t)
			tb := NewTable(tc.table, tc.ipVersion, TableOptions{Hooks: tc.hooks, LockWait: true})
			tb.SetChains(tc.chains)
			if st := applyIn(t, n, tb); !st.RestoreRan || st.ChainsCreated != len(tc.chains) {
				t.Fatalf("first apply: %+v", st)
			}
			got := saved(t, n, tc.save, tc.table)
			for b, target := range tc.hooks {
				if !slices.Contains(chainRules(got, b), "-A "+b+" "+hookText(b, target)) {
					t.Errorf("no hook %s -> %s in:\n%s", b, target, got)
				}
			}
			for _, c := range tc.chains {
				for i, r := range c.Rules {
					if !strings.Contains(got, "-A "+c.Name+" "+r.Match+" "+h(tc.chains, c.Name, i)) {
						t.Errorf("rule %d of %s missing:\n%s", i, c.Name, got)
					}
				}
			}
			if st := applyIn(t, n, tb); st.RestoreRan {
				t.Fatalf("re-apply ran a restore: %+v", st)
			}
			fresh := NewTable(tc.table, tc.ipVersion, TableOptions{Hooks: tc.hooks})
			fresh.SetChains(tc.chains)
			if st := applyIn(t, n, fresh); st.RestoreRan {
				t.Fatalf("fresh Table ran a restore: %+v", st)
			}
			fresh.SetChains(nil)
			applyIn(t, n, fresh)
			if got := saved(t, n, tc.save, tc.table); strings.Contains(got, "cali") {
				t.Fatalf("left over after removal:\n%s", got)
			}
		})
	}
}

func hookText(builtin, target string) string {
	return `-m comment --comment "cali:` + ruleHash(builtin, Rule{}, 0, Rule{Action: "-j " + target}) + `" -j ` + target
}

// TestTableKernelRestoreError checks that a rejected restore names the line.
func TestTableKernelRestoreError(t *testing.T) {
	nstest.NeedKernel(t, "iptables-save", "iptables-restore")
	n := nstest.NewNS(t)
	tb := NewTable("filter", 4, TableOptions{})
	tb.SetChains([]Chain{{Name: "cali-bad", Rules: []Rule{{Match: "-m nosuchmatch", Action: "-j ACCEPT"}}}})
	var err error
	_ = n.Do(func(ns.NetNS) error { _, err = tb.Apply(); return nil })
	re, ok := err.(*RestoreError)
	if !ok || re.Line != 3 || !strings.Contains(re.Input, "nosuchmatch") || !tb.Dirty() {
		t.Fatalf("want RestoreError at line 3, got %v", err)
	}
	t.Logf("error as reported: %v", err)
	if got := saved(t, n, "iptables-save", "filter"); strings.Contains(got, "cali-bad") {
		t.Fatalf("failed restore left state:\n%s", got)
	}
}

package metrics

import (
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/internal/nstest"
	"github.com/calico-aio/calico-aio/iptables"
)

// TestMetricsKernelCommands runs the real dataplane in a namespace of its
// own with the agent's metrics as its observer: the iptables-save/-restore
// and ipset counters move with the commands really run, and a restore the
// kernel rejects counts as an error.
func TestMetricsKernelCommands(t *testing.T) {
	nstest.NeedKernel(t, "iptables-save", "iptables-restore", "ipset")
	n := nstest.NewNS(t)
	m := New("node1", "")
	dp := dataplane.New(dataplane.Config{Observer: m.ObserveExec})
	des := func(action string) dataplane.Desired {
		return dataplane.Desired{InSync: true,
			Tables: map[int]map[string][]iptables.Chain{4: {"filter": {
				{Name: "cali-FORWARD", Rules: []iptables.Rule{{Match: "-m set --match-set cali40metrics src", Action: action}}},
			}}},
			IPSets: map[string]dataplane.IPSet{"cali40metrics": {Type: "hash:net", Family: "inet", Members: []string{"10.65.0.2/32"}}},
		}
	}
	apply := func(d dataplane.Desired) error {
		return n.Do(func(ns.NetNS) error { return dp.Apply(d) })
	}

	if err := apply(des("-j ACCEPT")); err != nil {
		t.Fatalf("first apply: %v", err)
	}
	s1 := scrape(t, m)
	for _, name := range []string{"felix_iptables_save_calls", "felix_iptables_restore_calls", "felix_ipset_calls"} {
		if s1.Must(name) < 1 {
			t.Errorf("%s = %v after programming a chain and a set, want >= 1", name, s1.Must(name))
		}
	}
	for _, name := range []string{"felix_iptables_save_errors", "felix_iptables_restore_errors", "felix_ipset_errors"} {
		if v := s1.Must(name); v != 0 {
			t.Errorf("%s = %v after a clean apply", name, v)
		}
	}
	if s1.Must("felix_iptables_lines_executed", "ip_version", "4", "table", "filter") < 2 {
		t.Errorf("filter lines executed = %v", s1.Must("felix_iptables_lines_executed", "ip_version", "4", "table", "filter"))
	}

	// The same state again: nothing to do, no restore.
	if err := apply(des("-j ACCEPT")); err != nil {
		t.Fatal(err)
	}
	if s := scrape(t, m); s.Must("felix_iptables_restore_calls") != s1.Must("felix_iptables_restore_calls") {
		t.Errorf("idempotent apply ran a restore: %v -> %v", s1.Must("felix_iptables_restore_calls"), s.Must("felix_iptables_restore_calls"))
	}

	// A changed rule: one more restore.
	if err := apply(des("-j DROP")); err != nil {
		t.Fatal(err)
	}
	s2 := scrape(t, m)
	if s2.Must("felix_iptables_restore_calls") != s1.Must("felix_iptables_restore_calls")+1 {
		t.Errorf("restore calls %v -> %v after one changed rule, want +1", s1.Must("felix_iptables_restore_calls"), s2.Must("felix_iptables_restore_calls"))
	}

	// A rule the kernel rejects: the restore fails and counts as an error.
	if err := apply(des("-j NO-SUCH-TARGET-XYZ")); err == nil {
		t.Fatal("apply of a rule with an unknown target succeeded")
	}
	s3 := scrape(t, m)
	if s3.Must("felix_iptables_restore_errors") < 1 || s3.Must("felix_iptables_restore_calls") <= s2.Must("felix_iptables_restore_calls") {
		t.Errorf("failed restore: calls %v -> %v, errors %v", s2.Must("felix_iptables_restore_calls"),
			s3.Must("felix_iptables_restore_calls"), s3.Must("felix_iptables_restore_errors"))
	}
}

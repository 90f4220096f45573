package calc_test

import (
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/store/api"
)

// TestFloatingIPsSetting: as in Calico, a non-OpenStack endpoint's ipNATs
// are programmed only while floatingIPs is Enabled (node.<name> over
// default); an OpenStack endpoint's always are.
func TestFloatingIPsSetting(t *testing.T) {
	ds := datastore{}
	k8s := wep("default", "a", thisNode, "calia", nil, []string{"10.64.0.1/32"}, "open")
	k8s.Spec.IPNATs = []api.IPNAT{{InternalIP: "10.64.0.1", ExternalIP: "172.16.0.1"}}
	osw := wep("default", "b", thisNode, "calib", nil, []string{"10.64.0.2/32"}, "open")
	osw.Spec.Orchestrator = "openstack"
	osw.Metadata.Name = thisNode + "-openstack-b-eth0"
	osw.Spec.IPNATs = []api.IPNAT{{InternalIP: "10.64.0.2", ExternalIP: "172.16.0.2"}}
	ds.put(t, k8s)
	ds.put(t, osw)
	ds.put(t, profile("open", nil))
	s := fresh(t, ds, 0)
	dnat := func() string { return chainRules(s.Desired(false).Tables[4].NAT, rules.ChainFloatingIPDNAT, nil) }
	step := func(what string, change func(next datastore), wantK8s bool) {
		t.Helper()
		advance(t, &ds, change, s.Apply)
		got := dnat()
		if has := strings.Contains(got, "172.16.0.1"); has != wantK8s {
			t.Fatalf("%s: k8s endpoint's floating IP programmed %v, want %v:\n%s", what, has, wantK8s, got)
		}
		if !strings.Contains(got, "172.16.0.2") {
			t.Fatalf("%s: the OpenStack endpoint's floating IP is not programmed:\n%s", what, got)
		}
	}
	mode := func(name, v string) func(datastore) {
		return putFelix(t, name, func(s *api.FelixConfigurationSpec) { s.FloatingIPs = &v })
	}
	step("unset (Disabled)", func(datastore) {}, false)
	step("Enabled", mode("default", "Enabled"), true)
	step("node.<name> Disabled over default Enabled", mode("node."+thisNode, "Disabled"), false)
	step("node.<name> removed: default Enabled", func(next datastore) { next.remove("FelixConfiguration", "", "node."+thisNode) }, true)
	step("default Disabled", mode("default", "Disabled"), false)
}

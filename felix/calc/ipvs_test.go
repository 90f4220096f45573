package calc_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// TestKubeIPVSDesired: the calculation renders kube-proxy IPVS mode only
// while the agent says kube-ipvs0 exists; kubeNodePortRanges (default
// overlaid by the node's object) and iptablesMarkMask reach the rules; the
// this-host sets hold the host's addresses of their family, without those
// of kube-ipvs0 (interfaceExclude) and following interfaceExclude.
func TestKubeIPVSDesired(t *testing.T) {
	ds := datastore{}
	ds.put(t, wep("default", "a", thisNode, "calia", nil, []string{"10.64.0.1/32", "fd00::1/128"}, "open"))
	ds.put(t, profile("open", nil))
	s := fresh(t, ds, 0)
	s.SetHostInterfaces(map[string][]netip.Addr{
		"eth0":       {netip.MustParseAddr("192.168.1.5"), netip.MustParseAddr("fd01::5")},
		"lo":         {netip.MustParseAddr("127.0.0.1")},
		"kube-ipvs0": {netip.MustParseAddr("10.96.0.1")},
	})
	has := func(cs []iptables.Chain, name string) bool {
		for _, c := range cs {
			if c.Name == name {
				return true
			}
		}
		return false
	}
	d := s.Desired(true)
	if has(d.Tables[4].Filter, "cali-forward-check") || len(d.IPSets["cali40this-host"].Members) != 0 {
		t.Fatalf("IPVS rendered without kube-ipvs0")
	}
	s.SetKubeIPVS(true)
	d = s.Desired(true)
	if got := chainRules(d.Tables[4].Filter, "cali-forward-check", nil); !strings.Contains(got, "--dports 30000:32767") {
		t.Fatalf("default node ports:\n%s", got)
	}
	if got := d.IPSets["cali40this-host"]; got.Type != "hash:ip" || strings.Join(got.Members, ",") != "127.0.0.1,192.168.1.5" {
		t.Fatalf("cali40this-host %+v, want hash:ip 127.0.0.1,192.168.1.5 (not kube-ipvs0's 10.96.0.1)", got)
	}
	if got := d.IPSets["cali60this-host"]; strings.Join(got.Members, ",") != "fd01::5" {
		t.Fatalf("cali60this-host %+v", got)
	}
	for _, u := range diff(t, ds, func() datastore {
		next := ds.clone()
		next.put(t, felixDefault(func(s *api.FelixConfigurationSpec) {
			s.KubeNodePortRanges = &[]api.Port{api.PortRange(30000, 30100)}
			m := uint32(0xff000000)
			s.IptablesMarkMask = &m
			s.InterfaceExclude = "kube-ipvs0,lo"
		}))
		f := felixDefault(func(s *api.FelixConfigurationSpec) { s.KubeNodePortRanges = &[]api.Port{api.SinglePort(31000)} })
		f.Metadata.Name = "node." + thisNode
		next.put(t, f)
		return next
	}()) {
		s.Apply(u)
	}
	d = s.Desired(true)
	if got := chainRules(d.Tables[4].Filter, "cali-forward-check", nil); !strings.Contains(got, "--dports 31000 ") || strings.Contains(got, "30000") {
		t.Fatalf("node.%s kubeNodePortRanges 31000 over default's:\n%s", thisNode, got)
	}
	if got := chainRules(d.Tables[4].Filter, "cali-set-endpoint-mark", nil); !strings.Contains(got, "0x20000000/0xe0000000") {
		t.Fatalf("mask 0xff000000: the field is 0xe0000000:\n%s", got)
	}
	if got := d.IPSets["cali40this-host"]; strings.Join(got.Members, ",") != "192.168.1.5" {
		t.Fatalf("interfaceExclude lo: cali40this-host %+v", got)
	}
	s.SetKubeIPVS(false)
	d = s.Desired(true)
	if has(d.Tables[4].Filter, "cali-forward-check") {
		t.Fatalf("IPVS still rendered after kube-ipvs0 went")
	}
	if _, ok := d.IPSets["cali40this-host"]; ok {
		t.Fatalf("this-host set still desired after kube-ipvs0 went")
	}
}

package node

import (
	"regexp"
	"testing"

	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/store/api"
)

func TestPodMTU(t *testing.T) {
	def := regexp.MustCompile(config.DefaultMTUIfacePattern)
	links := []LinkMTU{
		{"lo", 65536, true}, {"eth0", 1500, true}, {"ens5", 9001, true}, {"enp0s3", 1450, true},
		{"eth9", 1200, false}, // down: not counted
		{"cali12345", 1000, true}, {"docker0", 1100, true}, {"vxlan.calico", 1400, true}, {"tunl0", 1480, true},
	}
	for _, tc := range []struct {
		name  string
		links []LinkMTU
		pat   *regexp.Regexp
		enc   Encaps
		set   MTUSettings
		want  int
	}{
		{"smallest matching up link", links, def, Encaps{}, MTUSettings{}, 1450},
		{"pattern", links, regexp.MustCompile("^ens"), Encaps{}, MTUSettings{}, 9001},
		{"nothing matches: 1460", links, regexp.MustCompile("^nope$"), Encaps{}, MTUSettings{}, 1460},
		{"only down links match: 1460", links, regexp.MustCompile("^eth9$"), Encaps{}, MTUSettings{}, 1460},
		{"IPIP", links, def, Encaps{IPIP: true}, MTUSettings{}, 1430},
		{"VXLAN", links, def, Encaps{VXLAN: true}, MTUSettings{}, 1400},
		{"VXLAN IPv6", links, def, Encaps{VXLANV6: true}, MTUSettings{}, 1380},
		{"smallest encapsulation wins", links, def, Encaps{IPIP: true, VXLAN: true, VXLANV6: true}, MTUSettings{}, 1380},
		{"configured VXLAN MTU", links, def, Encaps{VXLAN: true}, MTUSettings{VXLANMTU: 1300}, 1300},
		{"configured MTU of an unused encapsulation is ignored", links, def, Encaps{}, MTUSettings{VXLANMTU: 1300}, 1450},
		{"override", links, def, Encaps{VXLAN: true}, MTUSettings{Override: 1410, VXLANMTU: 1300}, 1410},
	} {
		if got := PodMTU(MTUInputs{Links: tc.links, Pattern: tc.pat, Encaps: tc.enc, Settings: tc.set}); got != tc.want {
			t.Errorf("%s: PodMTU = %d, want %d", tc.name, got, tc.want)
		}
	}
	// Felix's default pattern, name by name.
	for name, want := range map[string]bool{"eth0": true, "ens3": true, "enp0s31f6": true, "eno1": true, "enX0": false, "enP1p2s0": true,
		"wlan0": true, "wlp2s0": true, "ib0": false, "ibp1s0": true, "lo": false, "cali1": false, "docker0": false, "tunl0": false, "bond0": false} {
		if def.MatchString(name) != want {
			t.Errorf("default pattern on %s: %v, want %v", name, !want, want)
		}
	}
}

func TestPoolEncaps(t *testing.T) {
	pool := func(cidr, ipip, vxlan, sel string, disabled bool) *api.IPPool {
		return &api.IPPool{Spec: api.IPPoolSpec{CIDR: cidr, IPIPMode: api.IPIPMode(ipip), VXLANMode: api.VXLANMode(vxlan), NodeSelector: sel, Disabled: disabled}}
	}
	pools := []*api.IPPool{
		pool("10.1.0.0/16", "Always", "", "zone == 'a'", false),
		pool("10.2.0.0/16", "", "CrossSubnet", "zone == 'b'", false),
		pool("10.3.0.0/16", "", "Always", "", true), // disabled
		pool("fd00:1::/64", "", "Always", "all()", false),
		pool("10.4.0.0/16", "Never", "Never", "", false),
	}
	for _, tc := range []struct {
		labels map[string]string
		want   Encaps
	}{
		{map[string]string{"zone": "a"}, Encaps{IPIP: true, VXLANV6: true}},
		{map[string]string{"zone": "b"}, Encaps{VXLAN: true, VXLANV6: true}},
		{nil, Encaps{VXLANV6: true}},
	} {
		if got := PoolEncaps(pools, tc.labels); got != tc.want {
			t.Errorf("labels %v: %+v, want %+v", tc.labels, got, tc.want)
		}
	}
	if got := PoolEncaps(pools[4:], nil); got != (Encaps{}) {
		t.Errorf("Never pools: %+v", got)
	}
}

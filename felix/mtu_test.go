package felix

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/internal/nstest"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

func TestPodMTU(t *testing.T) {
	def := regexp.MustCompile(DefaultMTUIfacePattern)
	links := []linkMTU{
		{"lo", 65536, true}, {"eth0", 1500, true}, {"ens5", 9001, true}, {"enp0s3", 1450, true},
		{"eth9", 1200, false}, // down: not counted
		{"cali12345", 1000, true}, {"docker0", 1100, true}, {"vxlan.calico", 1400, true}, {"tunl0", 1480, true},
	}
	for _, tc := range []struct {
		name  string
		links []linkMTU
		pat   *regexp.Regexp
		enc   encaps
		set   mtuSettings
		want  int
	}{
		{"smallest matching up link", links, def, encaps{}, mtuSettings{}, 1450},
		{"pattern", links, regexp.MustCompile("^ens"), encaps{}, mtuSettings{}, 9001},
		{"nothing matches: 1460", links, regexp.MustCompile("^nope$"), encaps{}, mtuSettings{}, 1460},
		{"only down links match: 1460", links, regexp.MustCompile("^eth9$"), encaps{}, mtuSettings{}, 1460},
		{"IPIP", links, def, encaps{IPIP: true}, mtuSettings{}, 1430},
		{"VXLAN", links, def, encaps{VXLAN: true}, mtuSettings{}, 1400},
		{"VXLAN IPv6", links, def, encaps{VXLANV6: true}, mtuSettings{}, 1380},
		{"smallest encapsulation wins", links, def, encaps{IPIP: true, VXLAN: true, VXLANV6: true}, mtuSettings{}, 1380},
		{"configured VXLAN MTU", links, def, encaps{VXLAN: true}, mtuSettings{VXLANMTU: 1300}, 1300},
		{"configured MTU of an unused encapsulation is ignored", links, def, encaps{}, mtuSettings{VXLANMTU: 1300}, 1450},
		{"override", links, def, encaps{VXLAN: true}, mtuSettings{Override: 1410, VXLANMTU: 1300}, 1410},
	} {
		if got := podMTU(mtuInputs{Links: tc.links, Pattern: tc.pat, Encaps: tc.enc, Settings: tc.set}); got != tc.want {
			t.Errorf("%s: podMTU = %d, want %d", tc.name, got, tc.want)
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
		want   encaps
	}{
		{map[string]string{"zone": "a"}, encaps{IPIP: true, VXLANV6: true}},
		{map[string]string{"zone": "b"}, encaps{VXLAN: true, VXLANV6: true}},
		{nil, encaps{VXLANV6: true}},
	} {
		if got := poolEncaps(pools, tc.labels); got != tc.want {
			t.Errorf("labels %v: %+v, want %+v", tc.labels, got, tc.want)
		}
	}
	if got := poolEncaps(pools[4:], nil); got != (encaps{}) {
		t.Errorf("Never pools: %+v", got)
	}
}

func TestParseMTUEnv(t *testing.T) {
	env := map[string]string{"FELIX_MTUIFACEPATTERN": "^bond", "FELIX_VXLANMTU": "1350", "FELIX_IPINIPMTU": "1420", "FELIX_VXLANMTUV6": "1330"}
	c, err := ParseFlags([]string{"--nodename", "n"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if s := mtuFromSpec(0, c.felixEnv); s != (mtuSettings{Pattern: "^bond", VXLANMTU: 1350, IPIPMTU: 1420, VXLANMTUV6: 1330}) {
		t.Errorf("parsed %+v", s)
	}
	for k, v := range map[string]string{"FELIX_MTUIFACEPATTERN": "(", "FELIX_VXLANMTU": "big", "FELIX_IPINIPMTU": "40", "FELIX_VXLANMTUV6": "70000"} {
		_, err := ParseFlags([]string{"--nodename", "n"}, func(n string) string { return map[string]string{k: v}[n] })
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: error %v, want it named", k, v, err)
		}
	}
	if _, err := ParseFlags([]string{"--nodename", "n", "--mtu", "20"}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "FELIX_MTU") {
		t.Errorf("--mtu 20: %v", err)
	}
	c, err = ParseFlags([]string{"--nodename", "n"}, func(k string) string { return map[string]string{"FELIX_MTU": "1400"}[k] })
	if err != nil || c.mtu.Override != 1400 {
		t.Errorf("FELIX_MTU=1400: %+v %v", c.mtu, err)
	}
}

// TestMTUFromHostInterfaces detects the pod MTU from veths of different MTUs
// in a namespace of its own, with mtuIfacePattern and pools from etcd, and
// keeps <lib>/mtu current as they change.
func TestMTUFromHostInterfaces(t *testing.T) {
	nstest.NeedKernel(t)
	n := nstest.NewNS(t)
	err := n.Do(func(ns.NetNS) error {
		for _, l := range []struct {
			name, peer string
			mtu        int
			up         bool
		}{{"eth1", "p1", 1400, true}, {"eth2", "p2", 9000, true}, {"eth3", "p3", 1200, false}, {"cali1", "p4", 1000, true}} {
			v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: l.name, MTU: l.mtu}, PeerName: l.peer}
			if err := netlink.LinkAdd(v); err != nil {
				return err
			}
			if !l.up {
				continue
			}
			for _, name := range []string{l.name, l.peer} {
				link, err := netlink.LinkByName(name)
				if err != nil {
					return err
				}
				if err := netlink.LinkSetUp(link); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl := storetest.StartEtcd(t).Client(t)
	nk, _ := api.LookupKind("Node")
	node := nk.NewObject().(*api.Node)
	node.Metadata.Name, node.Metadata.Labels = "n1", map[string]string{"zone": "a"}
	if _, err := cl.CreateResource(ctx, node); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mw := newMTUWatch(cl, "n1", dir, 0, spec{})
	mw.links = func() (out []linkMTU, err error) {
		err = n.Do(func(ns.NetNS) error { out, err = hostLinks(); return err })
		return out, err
	}
	file := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "mtu"))
		return string(b)
	}
	// eth1 (1400) is the smallest up link the default pattern matches: not
	// the down eth3, not cali1.
	if mtu, err := mw.update(ctx); err != nil || mtu != 1400 || file() != "1400" {
		t.Fatalf("default pattern: mtu %d (file %q), %v; want 1400", mtu, file(), err)
	}

	go mw.run(ctx)
	waitFile := func(want, why string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for file() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: mtu file %q, want %q", why, file(), want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// FelixConfiguration mtuIfacePattern is honoured.
	fk, _ := api.LookupKind("FelixConfiguration")
	fc := fk.NewObject().(*api.FelixConfiguration)
	fc.Metadata.Name, fc.Spec.MTUIfacePattern = "default", "^eth2$"
	if _, err := cl.CreateResource(ctx, fc); err != nil {
		t.Fatal(err)
	}
	waitFile("9000", "mtuIfacePattern ^eth2$")

	// A pool this node uses that encapsulates takes the overhead off. The
	// pools are stored raw, as another Calico writer would.
	put := func(name, body string) {
		t.Helper()
		pk, _ := api.LookupKind("IPPool")
		doc := `{"kind":"IPPool","apiVersion":"projectcalico.org/v3","metadata":{"name":"` + name + `"},"spec":` + body + `}`
		if _, err := cl.Create(ctx, store.ResourceKey(pk, "", name), []byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	put("other-zone", `{"cidr":"10.2.0.0/16","vxlanMode":"Always","nodeSelector":"zone == 'b'"}`)
	put("ipip", `{"cidr":"10.1.0.0/16","ipipMode":"Always","nodeSelector":"zone == 'a'"}`)
	waitFile("8980", "IPIP pool selecting this node (the VXLAN one does not)")

	// Relabelling the node into zone b brings the VXLAN pool in instead.
	r, err := cl.GetResource(ctx, nk, "", "n1")
	if err != nil {
		t.Fatal(err)
	}
	r.GetObjectMeta().Labels = map[string]string{"zone": "b"}
	if _, err := cl.UpdateResource(ctx, r); err != nil {
		t.Fatal(err)
	}
	waitFile("8950", "VXLAN pool after relabelling")
}

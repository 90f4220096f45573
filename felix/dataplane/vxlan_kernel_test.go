package dataplane

import (
	"errors"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
)

// vxlanText renders the VXLAN device's kernel state in n: its link
// details, addresses, neighbours, FDB and the routes over it.
func vxlanText(t *testing.T, n ns.NetNS) string {
	return vxlanTextOf(t, n, "vxlan.calico", "-4")
}

func vxlanTextOf(t *testing.T, n ns.NetNS, dev, fam string) string {
	t.Helper()
	var b strings.Builder
	link := run(t, n, "ip", "-d", "-o", "link", "show", "dev", dev)
	for _, re := range []string{`mtu \d+`, `state \S+`, `link/ether \S+`, `vxlan id \d+`, `local \S+`, `dev \S+`, `dstport \d+`, `nolearning`} {
		b.WriteString(regexp.MustCompile(re).FindString(link) + "\n")
	}
	for _, cmd := range [][]string{
		{"ip", fam, "-o", "addr", "show", "dev", dev, "scope", "global"},
		{"ip", fam, "neigh", "show", "dev", dev, "nud", "permanent"},
		{"bridge", "fdb", "show", "dev", dev},
		{"ip", fam, "route", "show", "dev", dev},
	} {
		lines := strings.Split(strings.TrimSpace(run(t, n, cmd[0], cmd[1:]...)), "\n")
		slices.Sort(lines) // the kernel's order is its hash's
		for _, line := range lines {
			if strings.Contains(line, "proto kernel") {
				continue // the kernel's own routes for the device's addresses
			}
			if f := strings.Fields(line); len(f) > 3 && (f[2] == "inet" || f[2] == "inet6") {
				line = f[3] // the address only
			}
			b.WriteString(strings.TrimSpace(line) + "\n")
		}
	}
	return b.String()
}

// The VXLAN device follows FelixConfiguration's VNI, port and MTU, carries
// the tunnel address, one permanent neighbour and FDB entry per peer and
// the onlink routes over it; a changed VNI replaces the device, a removed
// peer goes, and no desired device removes it.
func TestVXLANDeviceKernel(t *testing.T) {
	needKernel(t)
	n := newKernelNS(t, wrapTools(t))
	vm, vm6, rm := newVXLANManager("vxlan.calico"), newVXLANManager("vxlan-v6.calico"), newRouteManager(0)
	apply := func(v VXLAN, routes map[netip.Prefix]RouteTarget) {
		t.Helper()
		err := n.Do(func(ns.NetNS) error {
			return errors.Join(applyOverlayAndRoutes(vm, vm6, rm, Desired{VXLAN: v, Routes: maps.Clone(routes), InSync: true})...)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	dev := &VXLANDevice{Name: "vxlan.calico", VNI: 4096, Port: 4789, Addr: netip.MustParseAddr("10.65.0.1"),
		MAC: "66:aa:00:00:00:01", Parent: netip.MustParseAddr("172.30.0.1")}
	peers := []VXLANPeer{
		{Addr: netip.MustParseAddr("10.65.0.65"), MAC: "66:aa:00:00:00:02", NodeIP: netip.MustParseAddr("172.30.0.2")},
		{Addr: netip.MustParseAddr("10.65.0.129"), MAC: "66:aa:00:00:00:03", NodeIP: netip.MustParseAddr("10.9.0.3")},
	}
	onlink := func(via string) RouteTarget {
		return RouteTarget{Iface: "vxlan.calico", Via: []netip.Addr{netip.MustParseAddr(via)}, OnLink: true}
	}
	routes := map[netip.Prefix]RouteTarget{
		netip.MustParsePrefix("10.65.0.64/26"):  onlink("10.65.0.65"),
		netip.MustParsePrefix("10.65.0.128/26"): onlink("10.65.0.129"),
		netip.MustParsePrefix("10.65.0.7/32"):   onlink("10.65.0.65"),
	}
	apply(VXLAN{Device: dev, Peers: peers}, routes)
	want := `mtu 1450
state UNKNOWN
link/ether 66:aa:00:00:00:01
vxlan id 4096
local 172.30.0.1
dev uplink
dstport 4789
nolearning
10.65.0.1/32
10.65.0.129 lladdr 66:aa:00:00:00:03 PERMANENT
10.65.0.65 lladdr 66:aa:00:00:00:02 PERMANENT
66:aa:00:00:00:02 dst 172.30.0.2 self permanent
66:aa:00:00:00:03 dst 10.9.0.3 self permanent
10.65.0.128/26 via 10.65.0.129 proto 80 onlink
10.65.0.64/26 via 10.65.0.65 proto 80 onlink
10.65.0.7 via 10.65.0.65 proto 80 onlink
`
	if got := vxlanText(t, n); got != want {
		t.Fatalf("after the first apply:\n%s", lineDiff(got, want))
	}
	// Applying the same again changes nothing; a resync finds it right.
	vm.dirty, rm.dirty = true, true
	apply(VXLAN{Device: dev, Peers: peers}, routes)
	if got := vxlanText(t, n); got != want {
		t.Fatalf("after a resync:\n%s", lineDiff(got, want))
	}
	// vxlanVNI, vxlanPort, vxlanMTU changed, a peer and its route gone.
	dev2 := *dev
	dev2.VNI, dev2.Port, dev2.MTU = 4097, 4790, 1400
	delete(routes, netip.MustParsePrefix("10.65.0.128/26"))
	apply(VXLAN{Device: &dev2, Peers: peers[:1]}, routes)
	want2 := `mtu 1400
state UNKNOWN
link/ether 66:aa:00:00:00:01
vxlan id 4097
local 172.30.0.1
dev uplink
dstport 4790
nolearning
10.65.0.1/32
10.65.0.65 lladdr 66:aa:00:00:00:02 PERMANENT
66:aa:00:00:00:02 dst 172.30.0.2 self permanent
10.65.0.64/26 via 10.65.0.65 proto 80 onlink
10.65.0.7 via 10.65.0.65 proto 80 onlink
`
	if got := vxlanText(t, n); got != want2 {
		t.Fatalf("after changing VNI, port, MTU and peers:\n%s", lineDiff(got, want2))
	}
	apply(VXLAN{}, nil)
	if out := run(t, n, "ip", "-o", "link", "show"); strings.Contains(out, "vxlan.calico") {
		t.Fatalf("vxlan.calico still present with no device desired:\n%s", out)
	}
}

// The IPv6 device: vxlan-v6.calico over the node's IPv6 address, MTU the
// parent's minus 70 (vxlanMTUV6 unset), the tunnel address as /128, IPv6
// neighbours, FDB entries to IPv6 node addresses and onlink routes.
func TestVXLANDeviceKernelIPv6(t *testing.T) {
	needKernel(t)
	n := newKernelNS(t, wrapTools(t))
	vm, vm6, rm := newVXLANManager("vxlan.calico"), newVXLANManager("vxlan-v6.calico"), newRouteManager(0)
	dev := &VXLANDevice{Name: "vxlan-v6.calico", VNI: 4096, Port: 4789, Addr: netip.MustParseAddr("fd00:65::1"),
		MAC: "66:aa:00:00:06:01", Parent: netip.MustParseAddr("fd00:30::1")}
	peer := VXLANPeer{Addr: netip.MustParseAddr("fd00:65::41"), MAC: "66:aa:00:00:06:02", NodeIP: netip.MustParseAddr("fd00:30::2")}
	routes := map[netip.Prefix]RouteTarget{netip.MustParsePrefix("fd00:65::40/122"): {Iface: "vxlan-v6.calico",
		Via: []netip.Addr{peer.Addr}, OnLink: true}}
	if err := n.Do(func(ns.NetNS) error {
		return errors.Join(applyOverlayAndRoutes(vm, vm6, rm, Desired{VXLANV6: VXLAN{Device: dev, Peers: []VXLANPeer{peer}},
			Routes: routes, InSync: true})...)
	}); err != nil {
		t.Fatal(err)
	}
	want := `mtu 1430
state UNKNOWN
link/ether 66:aa:00:00:06:01
vxlan id 4096
local fd00:30::1
dev uplink
dstport 4789
nolearning
fd00:65::1/128
fd00:65::41 lladdr 66:aa:00:00:06:02 PERMANENT
66:aa:00:00:06:02 dst fd00:30::2 self permanent
fd00:65::40/122 via fd00:65::41 proto 80 metric 1024 onlink pref medium
`
	if got := vxlanTextOf(t, n, "vxlan-v6.calico", "-6"); got != want {
		t.Fatalf("IPv6 device:\n%s\ngot:\n%s", lineDiff(got, want), got)
	}
	if out := run(t, n, "ip", "-o", "link", "show"); strings.Contains(out, "vxlan.calico") {
		t.Errorf("an IPv4 device without one desired:\n%s", out)
	}
}

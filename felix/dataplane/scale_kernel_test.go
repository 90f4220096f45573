package dataplane

import (
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/internal/nstest"
)

// scaleNode is a namespace standing for a node with many pods: workload
// veths calis0, calis1, ... (peers pods0, ...), one endpoint on each.
type scaleNode struct {
	ns ns.NetNS
}

// newScaleNode makes the namespace with n workload veths; it goes when
// the test ends.
func newScaleNode(tb testing.TB, n int) *scaleNode {
	tb.Helper()
	s := &scaleNode{ns: nstest.NewNS(tb)}
	s.do(tb, func() error {
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		for i := 0; i < n && err == nil; i++ {
			la := netlink.NewLinkAttrs()
			la.Name, la.Flags = scaleIface(i), net.FlagUp
			err = netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: fmt.Sprintf("pods%d", i)})
		}
		return err
	})
	return s
}

func (s *scaleNode) do(tb testing.TB, f func() error) {
	tb.Helper()
	if err := s.ns.Do(func(ns.NetNS) error { return f() }); err != nil {
		tb.Fatal(err)
	}
}

func scaleIface(i int) string { return fmt.Sprintf("calis%d", i) }

func scaleAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 66, byte(i >> 8), byte(i)}) }

// desired has endpoints (and their routes) on the first n veths.
func (s *scaleNode) desired(n int) Desired {
	des := Desired{InSync: true, Routes: map[netip.Prefix]RouteTarget{}}
	for i := 0; i < n; i++ {
		a := scaleAddr(i)
		des.Endpoints = append(des.Endpoints, LocalEndpoint{Iface: scaleIface(i), Addrs: []netip.Addr{a},
			MAC: fmt.Sprintf("ee:ee:ee:00:%02x:%02x", i>>8, i&0xff)})
		des.Routes[netip.PrefixFrom(a, 32)] = RouteTarget{Iface: scaleIface(i)}
	}
	return des
}

// cniAdd does what the CNI plugin does on the host for pod i before its
// endpoint reaches the agent: its route (the interface exists already).
func (s *scaleNode) cniAdd(tb testing.TB, i int) {
	tb.Helper()
	s.do(tb, func() error {
		l, err := netlink.LinkByName(scaleIface(i))
		if err != nil {
			return err
		}
		dst := netip.PrefixFrom(scaleAddr(i), 32)
		return netlink.RouteReplace(&netlink.Route{LinkIndex: l.Attrs().Index, Scope: netlink.SCOPE_LINK, Protocol: 80,
			Dst: &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(32, 32)}})
	})
}

func (s *scaleNode) apply(tb testing.TB, dp *Dataplane, des Desired) {
	tb.Helper()
	s.do(tb, func() error { return dp.Apply(des) })
}

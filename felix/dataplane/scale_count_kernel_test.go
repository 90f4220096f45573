package dataplane

import (
	"maps"
	"net"
	"testing"

	"github.com/vishvananda/netlink"
)

// countingNL counts the dataplane's netlink requests by kind; dumps of a
// whole table are told apart from those the kernel filters to one
// interface.
type countingNL struct {
	nlOps
	n map[string]int
}

func (c *countingNL) AddrAdd(l netlink.Link, a *netlink.Addr) error {
	c.n["AddrAdd"]++
	return c.nlOps.AddrAdd(l, a)
}
func (c *countingNL) AddrDel(l netlink.Link, a *netlink.Addr) error {
	c.n["AddrDel"]++
	return c.nlOps.AddrDel(l, a)
}
func (c *countingNL) AddrList(l netlink.Link, f int) ([]netlink.Addr, error) {
	c.n["AddrList"]++
	return c.nlOps.AddrList(l, f)
}
func (c *countingNL) FilterDel(f netlink.Filter) error {
	c.n["FilterDel"]++
	return c.nlOps.FilterDel(f)
}
func (c *countingNL) FilterList(l netlink.Link, p uint32) ([]netlink.Filter, error) {
	c.n["FilterList"]++
	return c.nlOps.FilterList(l, p)
}
func (c *countingNL) FilterReplace(f netlink.Filter) error {
	c.n["FilterReplace"]++
	return c.nlOps.FilterReplace(f)
}
func (c *countingNL) LinkAdd(l netlink.Link) error { c.n["LinkAdd"]++; return c.nlOps.LinkAdd(l) }
func (c *countingNL) LinkByIndex(i int) (netlink.Link, error) {
	c.n["LinkByIndex"]++
	return c.nlOps.LinkByIndex(i)
}
func (c *countingNL) LinkByName(s string) (netlink.Link, error) {
	c.n["LinkByName"]++
	return c.nlOps.LinkByName(s)
}
func (c *countingNL) LinkDel(l netlink.Link) error { c.n["LinkDel"]++; return c.nlOps.LinkDel(l) }
func (c *countingNL) LinkList() ([]netlink.Link, error) {
	c.n["LinkList"]++
	return c.nlOps.LinkList()
}
func (c *countingNL) LinkSetHardwareAddr(l netlink.Link, a net.HardwareAddr) error {
	c.n["LinkSetHardwareAddr"]++
	return c.nlOps.LinkSetHardwareAddr(l, a)
}
func (c *countingNL) LinkSetMTU(l netlink.Link, m int) error {
	c.n["LinkSetMTU"]++
	return c.nlOps.LinkSetMTU(l, m)
}
func (c *countingNL) LinkSetUp(l netlink.Link) error  { c.n["LinkSetUp"]++; return c.nlOps.LinkSetUp(l) }
func (c *countingNL) NeighDel(n *netlink.Neigh) error { c.n["NeighDel"]++; return c.nlOps.NeighDel(n) }
func (c *countingNL) NeighList(i, f int) ([]netlink.Neigh, error) {
	c.n["NeighList"]++
	return c.nlOps.NeighList(i, f)
}
func (c *countingNL) NeighSet(n *netlink.Neigh) error { c.n["NeighSet"]++; return c.nlOps.NeighSet(n) }
func (c *countingNL) QdiscAdd(q netlink.Qdisc) error  { c.n["QdiscAdd"]++; return c.nlOps.QdiscAdd(q) }
func (c *countingNL) QdiscDel(q netlink.Qdisc) error  { c.n["QdiscDel"]++; return c.nlOps.QdiscDel(q) }
func (c *countingNL) QdiscList(l netlink.Link) ([]netlink.Qdisc, error) {
	c.n["QdiscList"]++
	return c.nlOps.QdiscList(l)
}
func (c *countingNL) QdiscReplace(q netlink.Qdisc) error {
	c.n["QdiscReplace"]++
	return c.nlOps.QdiscReplace(q)
}
func (c *countingNL) RouteAdd(r *netlink.Route) error { c.n["RouteAdd"]++; return c.nlOps.RouteAdd(r) }
func (c *countingNL) RouteDel(r *netlink.Route) error { c.n["RouteDel"]++; return c.nlOps.RouteDel(r) }
func (c *countingNL) RouteReplace(r *netlink.Route) error {
	c.n["RouteReplace"]++
	return c.nlOps.RouteReplace(r)
}
func (c *countingNL) RouteListFiltered(f int, r *netlink.Route, mask uint64) ([]netlink.Route, error) {
	if mask&netlink.RT_FILTER_OIF != 0 {
		c.n["RouteList(one interface)"]++
	} else {
		c.n["RouteList(whole table)"]++
	}
	return c.nlOps.RouteListFiltered(f, r, mask)
}

// dumps are the requests whose cost grows with the node.
var dumps = []string{"LinkList", "RouteList(whole table)", "NeighList", "QdiscList", "AddrList"}

// TestApplyOneEndpointIsIncremental: with a node's pods programmed, one
// pod added (its route written by the CNI plugin first) and then removed
// costs a few netlink requests about that pod (its interface looked up
// once per apply, its routes read back through a dump the kernel filters
// to it, its route and neighbour written or deleted) and no dump of the node's
// links, routes, neighbours, qdiscs or addresses; the same with twice as
// many pods. The periodic resync still reads everything back, listing the
// links, neighbour and qdisc tables once, not once per pod.
func TestApplyOneEndpointIsIncremental(t *testing.T) {
	needKernel(t)
	t.Parallel()
	const big = 24
	s := newScaleNode(t, big+1)
	counts := map[string]int{}
	perPod := map[int]map[string]int{}
	for _, n := range []int{big / 2, big} {
		dp := New(Config{})
		t.Cleanup(dp.Close)
		dp.nl.wrap = func(o nlOps) nlOps { return &countingNL{nlOps: o, n: counts} }
		s.apply(t, dp, s.desired(n)) // start-up: reads everything back
		for _, d := range dumps[:3] {
			if counts[d] == 0 {
				t.Fatalf("start-up with %d pods made no %s (the count sees nothing): %v", n, d, counts)
			}
		}
		clear(counts)
		s.cniAdd(t, n)
		s.apply(t, dp, s.desired(n+1))
		s.apply(t, dp, s.desired(n))
		perPod[n] = maps.Clone(counts)
		for _, d := range dumps {
			if counts[d] > 0 {
				t.Errorf("with %d pods, one pod added and removed made %d %s: %v", n, counts[d], d, counts)
			}
		}
		dp.Resync()
		s.apply(t, dp, s.desired(n))
		if counts["LinkList"] == 0 || counts["RouteList(whole table)"] == 0 {
			t.Errorf("the resync did not read the routes back: %v", counts)
		}
		if counts["LinkList"] != 1 || counts["LinkByName"] >= n || counts["FilterList"] >= n {
			t.Errorf("the resync of %d pods listed links %d times and looked %d up one by one, want one dump shared by all (and no filter list on interfaces without an ingress qdisc): %v",
				n, counts["LinkList"], counts["LinkByName"], counts)
		}
		if counts["NeighList"] != 1 || counts["QdiscList"] != 1 {
			t.Errorf("the resync of %d pods listed neighbours %d and qdiscs %d times, want once each: %v",
				n, counts["NeighList"], counts["QdiscList"], counts)
		}
		dp.Close()
		clear(counts)
	}
	if !maps.Equal(perPod[big/2], perPod[big]) {
		t.Errorf("one pod's requests grow with the node: with %d pods %v, with %d %v", big/2, perPod[big/2], big, perPod[big])
	}
	total := 0
	for _, c := range perPod[big] {
		total += c
	}
	if total > 10 {
		t.Errorf("one pod added and removed made %d netlink requests, want at most 10: %v", total, perPod[big])
	}
	if perPod[big]["LinkByName"] > 2 {
		t.Errorf("one pod added and removed looked its interface up %d times, want once per apply (the endpoint and route managers share the answer): %v",
			perPod[big]["LinkByName"], perPod[big])
	}
	t.Logf("one pod added and removed: %v", perPod[big])
}

package cni

import (
	"fmt"
	"github.com/calico-aio/calico-aio/internal/nstest"
	"net/netip"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// Kernel tests of the host interface naming rule: a namespace stands in
// for the host, others for workloads.

func in(t *testing.T, n ns.NetNS, f func() error) {
	t.Helper()
	if err := n.Do(func(ns.NetNS) error { return f() }); err != nil {
		t.Fatal(err)
	}
}

// pair makes a veth in host named name whose other end is peer in pod
// (nil: on the host too).
func pair(t *testing.T, host, pod ns.NetNS, name, peer string) {
	t.Helper()
	in(t, host, func() error {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer}
		if pod != nil {
			v.PeerNamespace = netlink.NsFd(int(pod.Fd()))
		}
		return netlink.LinkAdd(v)
	})
}

// linkIndex is the index of interface name in n, 0 when there is none.
func linkIndex(t *testing.T, n ns.NetNS, name string) int {
	t.Helper()
	idx := 0
	_ = n.Do(func(ns.NetNS) error {
		if l, err := netlink.LinkByName(name); err == nil {
			idx = l.Attrs().Index
		}
		return nil
	})
	return idx
}

const self = "default/node1-cni-default--web2-eth0"

func choose(t *testing.T, host ns.NetNS, h HostIface) HostIfaceChoice {
	t.Helper()
	var c HostIfaceChoice
	in(t, host, func() error {
		var err error
		c, err = h.Choose()
		return err
	})
	return c
}

func TestHostIfaceChoice(t *testing.T) {
	nstest.NeedKernel(t)
	const pref = "calidefault-web"
	alt := HostIface{Preferred: pref, Self: self}.candidates()[1]
	if alt == pref || len(alt) != 15 || alt[:4] != "cali" {
		t.Fatalf("first alternative %q", alt)
	}
	if again := (HostIface{Preferred: pref, Self: self}).candidates()[1]; again != alt {
		t.Fatalf("alternatives are not stable: %q then %q", alt, again)
	}
	cases := []struct {
		name    string
		prepare func(t *testing.T, host, pod, other ns.NetNS)
		claims  Claims
		want    string
		replace bool
		// lazyWant is the choice when claims are read only once the first
		// choice is taken (production), where it differs from want.
		lazyWant string
		// peerOfThis: the name is taken by this workload's own veth, which
		// needs no claims to recognise.
		peerOfThis bool
	}{
		{name: "free", want: pref},
		{name: "leftover of this workload", prepare: func(t *testing.T, host, pod, _ ns.NetNS) {
			pair(t, host, pod, pref, "eth0")
		}, want: pref, replace: true, peerOfThis: true},
		{name: "another live workload, recorded nowhere", prepare: func(t *testing.T, host, _, other ns.NetNS) {
			pair(t, host, other, pref, "eth0")
		}, want: alt},
		{name: "another workload's endpoint records it, interface gone", claims: Claims{pref: {"default/node1-cni-default--web1-eth0"}}, want: alt, lazyWant: pref},
		{name: "this workload's endpoint records it (a new sandbox)", prepare: func(t *testing.T, host, _, other ns.NetNS) {
			pair(t, host, other, pref, "eth0")
		}, claims: Claims{pref: {self}}, want: pref, replace: true},
		{name: "recorded by this and another endpoint", prepare: func(t *testing.T, host, _, other ns.NetNS) {
			pair(t, host, other, pref, "eth0")
		}, claims: Claims{pref: {self, "default/x"}}, want: alt},
		{name: "orphan pair on the host", prepare: func(t *testing.T, host, _, _ ns.NetNS) {
			pair(t, host, nil, pref, "tmp0")
		}, want: pref, replace: true},
		{name: "not a veth", prepare: func(t *testing.T, host, _, _ ns.NetNS) {
			in(t, host, func() error { return netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: pref}}) })
		}, want: alt},
		{name: "first alternative taken too", prepare: func(t *testing.T, host, _, other ns.NetNS) {
			pair(t, host, other, pref, "eth0")
		}, claims: Claims{alt: {"default/y"}}, want: HostIface{Preferred: pref, Self: self}.candidates()[2]},
	}
	for _, c := range cases {
		for _, lazy := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/lazy=%v", c.name, lazy), func(t *testing.T) {
				host, pod, other := nstest.NewNS(t), nstest.NewNS(t), nstest.NewNS(t)
				if c.prepare != nil {
					c.prepare(t, host, pod, other)
				}
				before := linkIndex(t, host, pref)
				req := HostIface{Preferred: pref, Self: self, Netns: pod.Path(), IfName: "eth0", Claims: c.claims}
				want, loads := c.want, 0
				if lazy {
					req.Claims, req.LoadClaims = nil, func() (Claims, error) { loads++; return c.claims, nil }
					if c.lazyWant != "" {
						want = c.lazyWant
					}
				}
				got := choose(t, host, req)
				if got.Name != want || (got.leftover != nil) != c.replace {
					t.Fatalf("chose %q (replace %v), want %q (replace %v)", got.Name, got.leftover != nil, want, c.replace)
				}
				if firstFree := before == 0 || c.peerOfThis; lazy && firstFree != (loads == 0) {
					t.Errorf("claims read %d times; want them read only when the first choice is taken", loads)
				}
				in(t, host, got.RemoveLeftover)
				if after := linkIndex(t, host, pref); before != 0 && !c.replace && after != before {
					t.Errorf("%s was touched (index %d, now %d)", pref, before, after)
				}
				if c.replace && linkIndex(t, host, pref) != 0 {
					t.Errorf("leftover %s not removed", pref)
				}
			})
		}
	}
}

// Two workloads whose IDs share the first 11 characters are wired side by
// side; detaching one leaves the other.
func TestAttachSharedPrefix(t *testing.T) {
	nstest.NeedKernel(t)
	host, pod1, pod2 := nstest.NewNS(t), nstest.NewNS(t), nstest.NewNS(t)
	w1 := Workload{Node: "node1", Orchestrator: OrchestratorDocker, ID: "default-web1", IfName: "eth0"}
	w2 := Workload{Node: "node1", Orchestrator: OrchestratorDocker, ID: "default-web2", IfName: "eth0"}
	a1, a2 := []netip.Addr{netip.MustParseAddr("10.9.0.1")}, []netip.Addr{netip.MustParseAddr("10.9.0.2")}
	in(t, host, func() error {
		if _, err := w1.Attach(pod1.Path(), 1500, a1, nil); err != nil {
			return err
		}
		claims := Claims{w1.HostIface: {EndpointKey(EndpointNamespace, w1.EndpointName())}}
		_, err := w2.Attach(pod2.Path(), 1500, a2, claims.Source())
		return err
	})
	if w1.HostIface != "calidefault-web" || w2.HostIface == w1.HostIface || w2.HostIface == "" {
		t.Fatalf("host interfaces %q and %q", w1.HostIface, w2.HostIface)
	}
	if ep := w2.Endpoint(a2, "", nil); ep.Spec.InterfaceName != w2.HostIface {
		t.Errorf("endpoint records %q, wired %q", ep.Spec.InterfaceName, w2.HostIface)
	}
	for _, w := range []struct {
		pod  ns.NetNS
		name string
	}{{pod1, w1.HostIface}, {pod2, w2.HostIface}} {
		var peer netlink.Link
		in(t, host, func() (err error) { peer, err = hostPeerOf(w.pod.Path(), "eth0"); return err })
		if peer == nil || peer.Attrs().Name != w.name {
			t.Errorf("eth0 in %s leads to %v, want %s", w.pod.Path(), peer, w.name)
		}
	}
	// The first one's ADD again, as after a crash: its leftover is
	// replaced, the second one's pair stays.
	idx2 := linkIndex(t, host, w2.HostIface)
	in(t, host, func() error {
		_, err := w1.Attach(pod1.Path(), 1500, a1, Claims{w2.HostIface: {EndpointKey(EndpointNamespace, w2.EndpointName())}}.Source())
		return err
	})
	if w1.HostIface != "calidefault-web" {
		t.Fatalf("re-attached under %q", w1.HostIface)
	}
	if linkIndex(t, host, w2.HostIface) != idx2 {
		t.Fatalf("re-attaching the first workload touched the second's %s", w2.HostIface)
	}
	// Detaching the first with a wrong record (the second's name) and its
	// namespace known removes only its own pair.
	w1wrong := w1
	w1wrong.HostIface = w2.HostIface
	in(t, host, func() error { return w1wrong.Detach(pod1.Path()) })
	if linkIndex(t, host, w1.HostIface) != 0 || linkIndex(t, host, w2.HostIface) != idx2 {
		t.Fatalf("detach of the first: %s index %d, %s index %d (was %d)", w1.HostIface, linkIndex(t, host, w1.HostIface), w2.HostIface, linkIndex(t, host, w2.HostIface), idx2)
	}
	// Detaching the first again, its namespace known but empty, with the
	// wrong record: the second's pair is not this workload's.
	in(t, host, func() error { return w1wrong.Detach(pod1.Path()) })
	if linkIndex(t, host, w2.HostIface) != idx2 {
		t.Fatalf("second detach of the first removed the second's %s", w2.HostIface)
	}
	in(t, host, func() error { return w2.Detach("") })
	var left []string
	in(t, host, func() error {
		links, err := netlink.LinkList()
		for _, l := range links {
			if l.Attrs().Name != "lo" {
				left = append(left, l.Attrs().Name)
			}
		}
		return err
	})
	if len(left) != 0 {
		t.Errorf("host interfaces left: %v", left)
	}
}

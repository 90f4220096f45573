package hostiface

import (
	"context"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/internal/nstest"
)

// watchIn runs w in a network namespace of its own until the test ends
// and returns what runs f in that namespace.
func watchIn(t *testing.T, w *Watch) (in func(f func() error)) {
	t.Helper()
	nstest.NeedKernel(t)
	n := nstest.NewNS(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = n.Do(func(ns.NetNS) error { w.Run(ctx); return nil })
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func(f func() error) {
		t.Helper()
		if err := n.Do(func(ns.NetNS) error { return f() }); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWatchLinksSignalsHostInterfaces: in a namespace of its own, a host
// interface's MTU change passes its name on Links (whatever needed says),
// a workload veth pair coming does not.
func TestWatchLinksSignalsHostInterfaces(t *testing.T) {
	w := NewWatch()
	in := watchIn(t, w)
	in(func() error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth7"}, PeerName: "eth7p"})
	})
	setMTU := func(mtu int) {
		in(func() error {
			l, err := netlink.LinkByName("eth7")
			if err != nil {
				return err
			}
			return netlink.LinkSetMTU(l, mtu)
		})
	}
	// The subscription starts asynchronously: change the MTU until seen.
	seen := false
	for i := 0; i < 50 && !seen; i++ {
		setMTU(1400 + i)
		select {
		case name := <-w.Links:
			seen = name == "eth7" || name == "eth7p"
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !seen {
		t.Fatal("a host interface's MTU change never signalled Links")
	}
	time.Sleep(200 * time.Millisecond)
	drain := func() {
		for len(w.Links) > 0 {
			<-w.Links
		}
	}
	drain()
	in(func() error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "cali0000000a"}, PeerName: "cali0000000b"})
	})
	select {
	case name := <-w.Links:
		t.Errorf("a workload veth pair signalled Links (%q)", name)
	case <-time.After(500 * time.Millisecond):
	}
	setMTU(1300)
	select {
	case name := <-w.Links:
		if name != "eth7" {
			t.Errorf("eth7's MTU change signalled %q", name)
		}
	case <-time.After(5 * time.Second):
		t.Error("eth7's MTU change to 1300 did not signal Links")
	}
}

// TestWatchMarksIPVSUnknown: KubeIPVS looks at the kernel only when the
// watch says kube-ipvs0 may have changed. In a namespace of its own, the
// mark is set at the start; another host interface or a workload one
// coming leaves it clear; kube-ipvs0 coming or going sets it.
func TestWatchMarksIPVSUnknown(t *testing.T) {
	w := NewWatch()
	if !w.ipvsUnknown.Swap(false) {
		t.Fatal("a new watch does not ask for a first look at kube-ipvs0")
	}
	in := watchIn(t, w)
	// seen adds (or removes) a link until the watch passes its name on,
	// the subscription starting asynchronously.
	seen := func(name string, f func() error) {
		t.Helper()
		in(f)
		deadline := time.After(5 * time.Second)
		for {
			select {
			case got := <-w.Links:
				if got == name {
					return
				}
			case <-deadline:
				t.Fatalf("no event for %s", name)
			}
		}
	}
	seen("eth7", func() error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth7"}, PeerName: "eth7p"})
	})
	w.ipvsUnknown.Store(false) // the subscription's start set it
	in(func() error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "cali0000000a"}, PeerName: "cali0000000b"})
	})
	seen("eth8", func() error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth8"}, PeerName: "eth8p"})
	})
	if w.ipvsUnknown.Load() {
		t.Fatal("other interfaces coming marked kube-ipvs0 as unknown")
	}
	seen("kube-ipvs0", func() error {
		return netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "kube-ipvs0"}})
	})
	if !w.ipvsUnknown.Swap(false) {
		t.Fatal("kube-ipvs0 coming did not mark it unknown")
	}
	seen("kube-ipvs0", func() error {
		return netlink.LinkDel(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "kube-ipvs0"}})
	})
	if !w.ipvsUnknown.Load() {
		t.Fatal("kube-ipvs0 going did not mark it unknown")
	}
}

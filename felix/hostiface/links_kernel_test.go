package hostiface

import (
	"context"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/internal/nstest"
)

// TestWatchLinksSignalsHostInterfaces: in a namespace of its own, a host
// interface's MTU change passes its name on Links (whatever needed says),
// a workload veth pair coming does not.
func TestWatchLinksSignalsHostInterfaces(t *testing.T) {
	nstest.NeedKernel(t)
	n := nstest.NewNS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := NewWatch()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = n.Do(func(ns.NetNS) error { w.Run(ctx); return nil })
	}()
	defer func() { cancel(); <-done }()
	in := func(f func() error) {
		t.Helper()
		if err := n.Do(func(ns.NetNS) error { return f() }); err != nil {
			t.Fatal(err)
		}
	}
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

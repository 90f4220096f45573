package node

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/internal/nstest"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

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
	self := nk.NewObject().(*api.Node)
	self.Metadata.Name, self.Metadata.Labels = "n1", map[string]string{"zone": "a"}
	if _, err := cl.CreateResource(ctx, self); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mw := NewMTUWatch(cl, "n1", dir, 0, api.FelixConfigurationSpec{})
	mw.links = func() (out []LinkMTU, err error) {
		err = n.Do(func(ns.NetNS) error { out, err = HostLinks(); return err })
		return out, err
	}
	file := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "mtu"))
		return string(b)
	}
	// eth1 (1400) is the smallest up link the default pattern matches: not
	// the down eth3, not cali1.
	if mtu, err := mw.Update(ctx); err != nil || mtu != 1400 || file() != "1400" {
		t.Fatalf("default pattern: mtu %d (file %q), %v; want 1400", mtu, file(), err)
	}
	// The periodic recheck re-reads the interfaces only: it makes no
	// datastore request (a cancelled context would fail one).
	err = n.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName("eth1")
		if err != nil {
			return err
		}
		return netlink.LinkSetMTU(l, 1300)
	})
	if err != nil {
		t.Fatal(err)
	}
	done, stop := context.WithCancel(ctx)
	stop()
	if mtu, err := mw.recheck(done); err != nil || mtu != 1300 || file() != "1300" {
		t.Fatalf("recheck after eth1's MTU change: mtu %d (file %q), %v; want 1300 without a datastore read", mtu, file(), err)
	}

	links := make(chan string, 1) // hostiface.Watch.Links in the agent
	go mw.Run(ctx, links)
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

	// A host interface change signalled on links is read at once, not at
	// the next periodic recheck (90 s with a signal source).
	err = n.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName("eth2")
		if err != nil {
			return err
		}
		return netlink.LinkSetMTU(l, 8000)
	})
	if err != nil {
		t.Fatal(err)
	}
	links <- "eth2"
	waitFile("7950", "eth2's MTU 8000, signalled")
	if mw.mayMatter("veth1234") || mw.mayMatter("cali1") || !mw.mayMatter("eth2") || !mw.mayMatter("") {
		t.Error("only interfaces mtuIfacePattern (^eth2$) matches, or an unknown one, may change the MTU")
	}
}

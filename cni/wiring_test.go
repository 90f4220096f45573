package cni

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/internal/nstest"
)

// TestWiringQueuesAndRoutes: num_queues gives both veth ends that many
// queues; host-local's ipam.routes replace the pod's default routes, each
// via the usual gateway, and CHECK checks those instead;
// container_settings.allow_ip_forwarding turns forwarding on in the pod.
func TestWiringQueuesAndRoutes(t *testing.T) {
	nstest.NeedKernel(t)
	host, pod := nstest.NewNS(t), nstest.NewNS(t)
	in(t, pod, func() error { return writeSysctl("net/ipv4/ip_forward", "0") })
	w := podWiring{netns: pod.Path(), ifName: "eth0", mtu: 1500, queues: 4, allowForwarding: true,
		iface:  HostIface{Preferred: "caliqueues0", Self: "default/w"},
		addrs:  []netip.Addr{netip.MustParseAddr("10.65.0.5"), netip.MustParseAddr("fd00:65::5")},
		routes: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/64")}}
	var mac string
	in(t, host, func() error {
		var err error
		mac, err = w.setup()
		return err
	})
	in(t, host, func() error {
		l, err := netlink.LinkByName(w.hostVeth)
		if err != nil {
			return err
		}
		if a := l.Attrs(); a.NumTxQueues != 4 || a.NumRxQueues != 4 {
			t.Errorf("host veth has %d/%d queues, want 4/4", a.NumTxQueues, a.NumRxQueues)
		}
		return nil
	})
	in(t, pod, func() error {
		if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); err != nil || strings.TrimSpace(string(b)) != "1" {
			t.Errorf("pod ip_forward %q (%v), want 1 with allow_ip_forwarding", b, err)
		}
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		if a := l.Attrs(); a.NumTxQueues != 4 || a.NumRxQueues != 4 {
			t.Errorf("pod veth has %d/%d queues, want 4/4", a.NumTxQueues, a.NumRxQueues)
		}
		routes, err := netlink.RouteList(l, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		var got []string
		for _, r := range routes {
			if r.Gw != nil {
				got = append(got, routeDst(r).String()+" via "+r.Gw.String())
			}
		}
		want := "10.96.0.0/12 via 169.254.1.1,fd00:96::/64 via fe80::ecee:eeff:feee:eeee"
		if strings.Join(got, ",") != want {
			t.Errorf("pod gateway routes %v, want %s (no default routes)", got, want)
		}
		return nil
	})
	addrs := w.addrs
	if err := checkPod(pod.Path(), "eth0", mac, addrs, w.routes); err != nil {
		t.Errorf("CHECK with the custom routes: %v", err)
	}
	if err := checkPod(pod.Path(), "eth0", mac, addrs, nil); err == nil {
		t.Errorf("CHECK expecting default routes passed a pod without them")
	}
}

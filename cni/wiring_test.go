package cni

import (
	"errors"
	"net/netip"
	"os"
	"os/exec"
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

// HostRouteDev answers from one route lookup what a dump of the routing
// table did: the /32 (or /128) route to an interface that a pod address
// takes, nil when the lookup ends on a wider route, on a blackhole (as
// calico-node's for the node's blocks), an unreachable route or none; and
// checkHostRoutes refuses an address another interface routes.
func TestHostRouteDev(t *testing.T) {
	nstest.NeedKernel(t)
	host := nstest.NewNS(t)
	a4, a6 := netip.MustParseAddr("10.66.0.5"), netip.MustParseAddr("fd00:66::5")
	in(t, host, func() error {
		ip := func(args ...string) {
			t.Helper()
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				t.Fatalf("ip %v: %v: %s", args, err, out)
			}
		}
		lookup := func(what string, wantDev string) {
			t.Helper()
			for _, a := range []netip.Addr{a4, a6} {
				if dev, err := HostRouteDev(a); err != nil || dev != wantDev {
					t.Errorf("%s: route to %s via %q (%v), want via %q", what, a, dev, err, wantDev)
				}
			}
		}
		lookup("no route at all", "")
		for _, n := range []string{"up1", "cali0", "other"} {
			ip("link", "add", n, "type", "veth", "peer", "name", n+"p")
			ip("link", "set", n, "up")
			ip("link", "set", n+"p", "up")
		}
		ip("route", "add", "default", "dev", "up1")
		ip("-6", "route", "add", "default", "dev", "up1")
		lookup("a default route", "")
		ip("route", "add", "blackhole", "10.66.0.0/26")
		ip("-6", "route", "add", "blackhole", "fd00:66::/122")
		lookup("the node's block's blackhole", "")
		ip("route", "add", "unreachable", "10.66.0.4/30")
		ip("-6", "route", "add", "unreachable", "fd00:66::4/126")
		lookup("an unreachable route", "")
		ip("route", "add", "10.66.0.5/32", "dev", "cali0")
		ip("-6", "route", "add", "fd00:66::5/128", "dev", "cali0")
		lookup("the pod's route", "cali0")
		w := podWiring{hostVeth: "cali0", addrs: []netip.Addr{a4, a6}}
		if err := w.checkHostRoutes(); err != nil {
			t.Errorf("checkHostRoutes with the pod's own routes: %v", err)
		}
		w.hostVeth = "cali1"
		var taken *RouteTakenError
		if err := w.checkHostRoutes(); !errors.As(err, &taken) || taken.Dev != "cali0" {
			t.Errorf("checkHostRoutes of another interface: %v, want the route via cali0 taken", err)
		}
		if err := checkHost("cali0", w.addrs); err != nil {
			t.Errorf("checkHost cali0: %v", err)
		}
		if err := checkHost("other", w.addrs); err == nil {
			t.Errorf("checkHost passed an interface that does not route the addresses")
		}
		return nil
	})
}

package rules_test

import (
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/internal/nstest"
	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// With the rendered rules in the kernel, a workload's UDP to the VXLAN
// port (here vxlanPort 4790) is dropped in its cali-fw chain and never
// reaches a listener on the host; with allowVXLANPacketsFromWorkloads it
// does. Packets to another port are the in-order marker that everything
// sent before was processed.
func TestEncapFromWorkloadsKernel(t *testing.T) {
	nstest.NeedKernel(t, "iptables", "iptables-save", "iptables-restore", "ipset")
	host, pod := nstest.NewNS(t), nstest.NewNS(t)
	up := func(name, cidr string) error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		a, _ := netlink.ParseAddr(cidr)
		if err := netlink.AddrAdd(l, a); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	}
	err := host.Do(func(ns.NetNS) error {
		la := netlink.NewLinkAttrs()
		la.Name = "calienc0"
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "encpod0"}); err != nil {
			return err
		}
		p, err := netlink.LinkByName("encpod0")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetNsFd(p, int(pod.Fd())); err != nil {
			return err
		}
		return up("calienc0", "10.0.0.254/24")
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := pod.Do(func(ns.NetNS) error { return up("encpod0", "10.0.0.1/24") }); err != nil {
		t.Fatal(err)
	}
	var vx, marker *net.UDPConn
	err = host.Do(func(ns.NetNS) error {
		var err error
		if vx, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP("10.0.0.254"), Port: 4790}); err != nil {
			return err
		}
		marker, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP("10.0.0.254"), Port: 5000})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vx.Close(); marker.Close() })

	dp := dataplane.New(dataplane.Config{})
	apply := func(cfg rules.Config) {
		t.Helper()
		cfg.DefaultEndpointToHostAction = "Accept"
		open := api.Rule{Action: api.ActionAllow}
		tb, _ := rules.Render(cfg, rules.Input{
			Endpoints: []rules.Endpoint{{Iface: "calienc0", Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, Profiles: []string{"open"}}},
			Profiles:  map[string]rules.Profile{"open": {Ingress: []api.Rule{open}, Egress: []api.Rule{open}}},
		})
		des := dataplane.Desired{InSync: true, Routes: map[netip.Prefix]dataplane.RouteTarget{},
			Tables: map[int]map[string][]iptables.Chain{4: {"filter": tb.Filter, "nat": tb.NAT, "mangle": tb.Mangle, "raw": tb.Raw}}}
		if err := host.Do(func(ns.NetNS) error { return dp.Apply(des) }); err != nil {
			t.Fatal(err)
		}
	}
	send := func(port, n int) {
		t.Helper()
		err := pod.Do(func(ns.NetNS) error {
			c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP("10.0.0.254"), Port: port})
			if err != nil {
				return err
			}
			defer c.Close()
			for i := 0; i < n; i++ {
				if _, err := c.Write([]byte("x")); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// received waits for the marker, then counts what the VXLAN listener
	// has queued (without waiting).
	received := func() int {
		t.Helper()
		buf := make([]byte, 16)
		_ = marker.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, _, err := marker.ReadFromUDP(buf); err != nil {
			t.Fatalf("marker packet not received: %v", err)
		}
		n := 0
		for pending(t, vx) {
			if _, _, err := vx.ReadFromUDP(buf); err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	dropCounter := func() string {
		t.Helper()
		var out []byte
		err := host.Do(func(ns.NetNS) error {
			var err error
			out, err = exec.Command("iptables-save", "-c", "-t", "filter").CombinedOutput()
			return err
		})
		if err != nil {
			t.Fatalf("iptables-save: %v %s", err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "-A cali-fw-calienc0") && strings.Contains(l, "Drop VXLAN") {
				return regexp.MustCompile(`^\[(\d+):`).FindStringSubmatch(l)[1] + " " + regexp.MustCompile(`--dports \d+`).FindString(l)
			}
		}
		return "none"
	}

	apply(rules.Config{VXLANPort: 4790})
	send(4790, 3)
	send(5000, 1)
	if got := received(); got != 0 {
		t.Fatalf("vxlanPort 4790: the host received %d VXLAN packets from the workload, want 0", got)
	}
	if got := dropCounter(); got != "3 --dports 4790" {
		t.Fatalf("drop rule counter %q, want 3 packets to --dports 4790", got)
	}
	apply(rules.Config{VXLANPort: 4790, AllowVXLANPacketsFromWorkloads: true})
	send(4790, 2)
	send(5000, 1)
	if got := received(); got != 2 {
		t.Fatalf("allowVXLANPacketsFromWorkloads: the host received %d VXLAN packets, want 2", got)
	}
	if got := dropCounter(); got != "none" {
		t.Fatalf("allowVXLANPacketsFromWorkloads, yet a drop rule: %s", got)
	}
}

// pending reports whether a datagram waits in c's receive queue (SIOCINQ:
// the size of the next one), without reading or waiting.
func pending(t *testing.T, c *net.UDPConn) bool {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	n, ierr := 0, error(nil)
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil || ierr != nil {
		t.Fatalf("SIOCINQ: %v %v", err, ierr)
	}
	return n > 0
}

package routes

import (
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/internal/nstest"
	"github.com/calico-aio/calico-aio/iptables"
)

// IP-in-IP packets (IP protocol 4) reach a node only from known Calico
// nodes: the real dataplane programs cali40all-hosts-net and the cali-INPUT
// rules in a namespace; raw protocol-4 packets from a node's address are
// accepted, from another address dropped (rule counters). No ipip link is
// needed for the filter.
func TestIPIPFilterKernel(t *testing.T) {
	nstest.NeedKernel(t, "ip", "iptables", "iptables-save", "iptables-restore", "ipset")
	node, peer := nstest.NewNS(t), nstest.NewNS(t)
	veth := func() error {
		la := netlink.NewLinkAttrs()
		la.Name = "ipipt0"
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "ipipt1"}); err != nil {
			return err
		}
		p, err := netlink.LinkByName("ipipt1")
		if err != nil {
			return err
		}
		return netlink.LinkSetNsFd(p, int(peer.Fd()))
	}
	addr := func(name string, cidrs ...string) error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		for _, c := range cidrs {
			a, _ := netlink.ParseAddr(c)
			if err := netlink.AddrAdd(l, a); err != nil {
				return err
			}
		}
		return netlink.LinkSetUp(l)
	}
	if err := node.Do(func(ns.NetNS) error {
		if err := veth(); err != nil {
			return err
		}
		return addr("ipipt0", "192.0.2.1/24")
	}); err != nil {
		t.Fatal(err)
	}
	if err := peer.Do(func(ns.NetNS) error { return addr("ipipt1", "192.0.2.2/24", "192.0.2.3/24") }); err != nil {
		t.Fatal(err)
	}

	des := dataplane.Desired{InSync: true, IPSets: map[string]dataplane.IPSet{}, Routes: map[netip.Prefix]dataplane.RouteTarget{},
		Tables: map[int]map[string][]iptables.Chain{4: {"filter": {{Name: "cali-INPUT"}, {Name: "cali-OUTPUT"}, {Name: "cali-FORWARD"}}}}}
	addIPIPFilter(&des, calc.IPIPDesired{Enabled: true, NodeAddrs: []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")}})
	dp := dataplane.New(dataplane.Config{})
	if err := node.Do(func(ns.NetNS) error { return dp.Apply(des) }); err != nil {
		t.Fatal(err)
	}
	send := func(src string, n int) {
		t.Helper()
		err := peer.Do(func(ns.NetNS) error {
			c, err := net.DialIP("ip4:4", &net.IPAddr{IP: net.ParseIP(src)}, &net.IPAddr{IP: net.ParseIP("192.0.2.1")})
			if err != nil {
				return err
			}
			defer c.Close()
			// An inner IPv4 header (not decapsulated here: no ipip link).
			inner := []byte{0x45, 0, 0, 20, 0, 0, 0, 0, 64, 1, 0, 0, 10, 66, 0, 2, 10, 66, 0, 1}
			for i := 0; i < n; i++ {
				if _, err := c.Write(inner); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// counters returns the packet counts of cali-INPUT's accept and drop
	// rules for protocol 4.
	counters := func() (accepted, dropped int) {
		t.Helper()
		var out []byte
		err := node.Do(func(ns.NetNS) error {
			var err error
			out, err = exec.Command("iptables-save", "-c", "-t", "filter").CombinedOutput()
			return err
		})
		if err != nil {
			t.Fatalf("iptables-save: %v %s", err, out)
		}
		re := regexp.MustCompile(`^\[(\d+):\d+\] -A cali-INPUT -p (?:4|ipencap) (.*)-j (ACCEPT|DROP)$`)
		for _, line := range strings.Split(string(out), "\n") {
			m := re.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			n, _ := strconv.Atoi(m[1])
			if m[3] == "ACCEPT" && strings.Contains(m[2], "cali40all-hosts-net src") {
				accepted = n
			} else if m[3] == "DROP" {
				dropped = n
			}
		}
		return accepted, dropped
	}
	send("192.0.2.2", 3) // a Calico node
	if a, d := counters(); a != 3 || d != 0 {
		t.Fatalf("from a Calico node: accepted %d, dropped %d; want 3, 0", a, d)
	}
	send("192.0.2.3", 2) // not a Calico node
	if a, d := counters(); a != 3 || d != 2 {
		t.Fatalf("from an unknown host: accepted %d, dropped %d; want 3, 2", a, d)
	}
}

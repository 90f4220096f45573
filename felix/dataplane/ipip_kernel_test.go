package dataplane

import (
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// needIPIP skips when the kernel cannot make an ipip link (tried in the
// test's namespace): the one skip allowed under CI=true, as tunl0 cannot
// exist without it.
func needIPIP(t *testing.T, n ns.NetNS) {
	t.Helper()
	err := n.Do(func(ns.NetNS) error {
		if err := netlink.LinkAdd(&netlink.Iptun{LinkAttrs: netlink.LinkAttrs{Name: "ipipprobe"}}); err != nil {
			return err
		}
		l, err := netlink.LinkByName("ipipprobe")
		if err != nil {
			return err
		}
		return netlink.LinkDel(l)
	})
	if err != nil {
		t.Logf("creating an ipip link: %v", err)
		t.Skip("kernel has no ipip link type")
	}
}

// ipipText renders tunl0 in n: MTU, state, link type, its addresses and
// the routes over it.
func ipipText(t *testing.T, n ns.NetNS) string {
	t.Helper()
	var b strings.Builder
	link := run(t, n, "ip", "-d", "-o", "link", "show", "dev", "tunl0")
	b.WriteString(regexp.MustCompile(`mtu \d+`).FindString(link) + "\n")
	if regexp.MustCompile(`[<,]UP[,>]`).MatchString(link) {
		b.WriteString("up\n")
	}
	if strings.Contains(link, "link/ipip") {
		b.WriteString("ipip\n")
	}
	for _, cmd := range [][]string{
		{"ip", "-4", "-o", "addr", "show", "dev", "tunl0"},
		{"ip", "-4", "route", "show", "dev", "tunl0"},
	} {
		out := strings.TrimSpace(run(t, n, cmd[0], cmd[1:]...))
		if out == "" {
			continue
		}
		lines := strings.Split(out, "\n")
		slices.Sort(lines)
		for _, line := range lines {
			if strings.Contains(line, "proto kernel") {
				continue
			}
			if f := strings.Fields(line); len(f) > 3 && f[2] == "inet" {
				line = f[3]
			}
			b.WriteString(strings.TrimSpace(line) + "\n")
		}
	}
	return b.String()
}

// tunl0 exists, up, with the IPIP tunnel address as /32 and MTU the
// parent's minus 20 (or ipipMTU); BGP-learned routes go over it onlink
// with BGP's protocol; a changed address replaces the old one; IP-in-IP
// off takes the address off (the fallback device cannot be deleted).
func TestIPIPDeviceKernel(t *testing.T) {
	needKernel(t)
	n := newKernelNS(t, wrapTools(t))
	needIPIP(t, n)
	im, rm := newIPIPManager("tunl0"), newRouteManager(0)
	apply := func(d *IPIPDevice, routes map[netip.Prefix]RouteTarget) {
		t.Helper()
		err := n.Do(func(ns.NetNS) error {
			im.SetDesired(d, true)
			if im.dirty {
				rm.dirty = true
			}
			if err := im.Apply(); err != nil {
				return err
			}
			rm.SetDesired(routes, true)
			return rm.Apply()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	onlink := func(via string) RouteTarget {
		return RouteTarget{Iface: "tunl0", Via: []netip.Addr{netip.MustParseAddr(via)}, OnLink: true, Proto: 81}
	}
	dev := &IPIPDevice{Name: "tunl0", Addr: netip.MustParseAddr("10.66.0.1"), Parent: netip.MustParseAddr("172.30.0.1")}
	routes := map[netip.Prefix]RouteTarget{
		netip.MustParsePrefix("10.66.0.64/26"): onlink("10.9.0.2"),
		netip.MustParsePrefix("10.66.0.7/32"):  onlink("10.9.0.3"),
	}
	apply(dev, routes)
	want := "mtu 1480\nup\nipip\n10.66.0.1/32\n10.66.0.64/26 via 10.9.0.2 proto 81 onlink \n10.66.0.7 via 10.9.0.3 proto 81 onlink \n"
	if got := ipipText(t, n); strings.ReplaceAll(got, " \n", "\n") != strings.ReplaceAll(want, " \n", "\n") {
		t.Fatalf("after the first apply:\n%s", lineDiff(got, want))
	}
	dev2 := *dev
	dev2.MTU, dev2.Addr = 1400, netip.MustParseAddr("10.66.0.2")
	apply(&dev2, routes)
	want2 := strings.Replace(strings.Replace(want, "mtu 1480", "mtu 1400", 1), "10.66.0.1/32", "10.66.0.2/32", 1)
	if got := ipipText(t, n); strings.ReplaceAll(got, " \n", "\n") != strings.ReplaceAll(want2, " \n", "\n") {
		t.Fatalf("after ipipMTU and a new address:\n%s", lineDiff(got, want2))
	}
	apply(nil, nil)
	if out := run(t, n, "ip", "-4", "-o", "addr", "show", "dev", "tunl0"); strings.TrimSpace(out) != "" {
		t.Fatalf("IP-in-IP off, yet tunl0 has %s", out)
	}
}

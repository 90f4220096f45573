package rules_test

import (
	"errors"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/internal/nstest"
	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// kpod is a workload namespace wired to a test host namespace: a veth
// whose host end (Iface) has HostAddr/24 and whose pod end has Addr/24
// with a default route via HostAddr.
type kpod struct {
	NS             ns.NetNS
	Iface          string
	Addr, HostAddr netip.Addr
	podIface       string
	t              *testing.T
}

// kernelHost is a host namespace with a dataplane that applies rendered
// rules to it, and the pods wired to it.
type kernelHost struct {
	t  *testing.T
	ns ns.NetNS
	dp *dataplane.Dataplane
	// hosts are the members of cali40all-hosts-net (the calculation
	// fills it from the nodes' addresses).
	hosts []string
}

func newKernelHost(t *testing.T) *kernelHost {
	nstest.NeedKernel(t, "iptables", "iptables-save", "iptables-restore", "ipset")
	return &kernelHost{t: t, ns: nstest.NewNS(t), dp: dataplane.New(dataplane.Config{})}
}

// pod wires a new pod namespace: host end iface with 10.<n>.0.254/24,
// pod end with 10.<n>.0.1/24.
func (h *kernelHost) pod(iface string, n int) *kpod {
	t := h.t
	t.Helper()
	p := &kpod{NS: nstest.NewNS(t), Iface: iface, podIface: "eth" + iface[len(iface)-1:], t: t,
		Addr: netip.AddrFrom4([4]byte{10, byte(n), 0, 1}), HostAddr: netip.AddrFrom4([4]byte{10, byte(n), 0, 254})}
	up := func(name string, a netip.Addr) error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		addr, _ := netlink.ParseAddr(netip.PrefixFrom(a, 24).String())
		if err := netlink.AddrAdd(l, addr); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	}
	err := h.ns.Do(func(ns.NetNS) error {
		la := netlink.NewLinkAttrs()
		la.Name = iface
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: p.podIface}); err != nil {
			return err
		}
		peer, err := netlink.LinkByName(p.podIface)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetNsFd(peer, int(p.NS.Fd())); err != nil {
			return err
		}
		return up(iface, p.HostAddr)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = p.NS.Do(func(ns.NetNS) error {
		if err := up(p.podIface, p.Addr); err != nil {
			return err
		}
		l, err := netlink.LinkByName(p.podIface)
		if err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.IP(p.HostAddr.AsSlice())})
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// apply renders in with cfg (IPv4) and applies it with the host's
// dataplane, as the agent's loop does on a change: the same dataplane
// moves from what it programmed before to the new rendering.
func (h *kernelHost) apply(cfg rules.Config, in rules.Input) {
	h.t.Helper()
	tb, specs := rules.Render(cfg, in)
	des := dataplane.Desired{InSync: true, Routes: map[netip.Prefix]dataplane.RouteTarget{}, KeepExternalRoutes: true,
		IPSets: map[string]dataplane.IPSet{},
		Tables: map[int]map[string][]iptables.Chain{4: {"filter": tb.Filter, "nat": tb.NAT, "mangle": tb.Mangle, "raw": tb.Raw}}}
	for _, s := range specs {
		set := dataplane.IPSet{Type: "hash:net", Family: "inet"}
		switch s.Kind {
		case rules.IPSetPools:
			for _, p := range in.PoolSetMembers(s) {
				set.Members = append(set.Members, p.String())
			}
		case rules.IPSetAllHosts:
			set.Members = h.hosts
		}
		des.IPSets[s.Name] = set
	}
	if err := h.ns.Do(func(ns.NetNS) error { return h.dp.Apply(des) }); err != nil {
		h.t.Fatal(err)
	}
}

// run runs a command in the host namespace.
func (h *kernelHost) run(name string, args ...string) string {
	h.t.Helper()
	var out []byte
	err := h.ns.Do(func(ns.NetNS) error {
		var err error
		out, err = exec.Command(name, args...).CombinedOutput()
		return err
	})
	if err != nil {
		h.t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// listenTCP listens on the pod's address.
func (p *kpod) listenTCP(port int) {
	p.t.Helper()
	acceptTCP(p.t, p.NS, netip.AddrPortFrom(p.Addr, uint16(port)))
}

// acceptTCP listens on addr in namespace n until the test ends, accepting
// and closing every connection.
func acceptTCP(t *testing.T, n ns.NetNS, addr netip.AddrPort) {
	t.Helper()
	var l net.Listener
	err := n.Do(func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp4", addr.String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
}

// dial connects from the pod to addr with a deadline.
func (p *kpod) dial(addr netip.AddrPort, wait time.Duration) error {
	var err error
	nerr := p.NS.Do(func(ns.NetNS) error {
		var c net.Conn
		c, err = net.DialTimeout("tcp4", addr.String(), wait)
		if err == nil {
			c.Close()
		}
		return nil
	})
	if nerr != nil {
		p.t.Fatal(nerr)
	}
	return err
}

func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// open is a profile allowing everything.
var openProfile = map[string]rules.Profile{"open": {Ingress: []api.Rule{{Action: api.ActionAllow}}, Egress: []api.Rule{{Action: api.ActionAllow}}}}

// TestDenyActionKernel: a pod's TCP connect to a port another pod's
// ingress policy denies times out while iptablesFilterDenyAction is Drop,
// is refused at once (ICMP port unreachable from the REJECT) once it is
// Reject, and times out again back on Drop; the same holds for a port no
// policy allows (the end-of-tier verdict). An allowed port connects
// throughout. The dataplane moves between renderings as the agent does
// on a live change.
func TestDenyActionKernel(t *testing.T) {
	h := newKernelHost(t)
	a, b := h.pod("calidenya", 61), h.pod("calidenyb", 62)
	for _, port := range []int{8080, 8081, 8082} {
		b.listenTCP(port)
	}
	k := rules.PolicyKey{Name: "deny-8080"}
	tcp := func(action api.Action, port uint16) api.Rule {
		p := api.ProtocolFromString("TCP")
		return api.Rule{Action: action, Protocol: &p, Destination: api.EntityRule{Ports: []api.Port{api.SinglePort(port)}}}
	}
	in := rules.Input{
		Endpoints: []rules.Endpoint{
			{Iface: a.Iface, Addrs: []netip.Addr{a.Addr}, Profiles: []string{"open"}},
			{Iface: b.Iface, Addrs: []netip.Addr{b.Addr}, Profiles: []string{"open"}, IngressPolicies: []rules.PolicyKey{k}},
		},
		Policies: map[rules.PolicyKey]rules.Policy{k: {Key: k, Ingress: []api.Rule{tcp(api.ActionDeny, 8080), tcp(api.ActionAllow, 8082)}}},
		Profiles: openProfile,
	}
	check := func(action string, want func(error) bool, what string) {
		t.Helper()
		h.apply(rules.Config{DefaultEndpointToHostAction: "Accept", FilterDenyAction: action}, in)
		if err := a.dial(netip.AddrPortFrom(b.Addr, 8082), 5*time.Second); err != nil {
			t.Fatalf("%s: allowed port 8082: %v", action, err)
		}
		for _, port := range []uint16{8080, 8081} {
			if err := a.dial(netip.AddrPortFrom(b.Addr, port), 2*time.Second); !want(err) {
				t.Fatalf("%s: connect to denied port %d: %v, want %s", action, port, err, what)
			}
		}
	}
	check("Drop", timedOut, "a timeout")
	check("Reject", refused, "connection refused")
	if f := h.run("iptables-save", "-t", "filter"); !strings.Contains(f, "-j REJECT") {
		t.Fatalf("Reject: no REJECT rule in the kernel:\n%s", f)
	}
	check("Drop", timedOut, "a timeout")
	if f := h.run("iptables-save", "-t", "filter"); strings.Contains(f, "REJECT") {
		t.Fatalf("Drop again: REJECT left in the kernel:\n%s", f)
	}
}

// TestConntrackInvalidKernel: an ICMP port-unreachable error a pod sends
// about a flow conntrack never saw is INVALID: with the INVALID check (the
// default) its rule in the pod's cali-fw chain drops it and the host never
// receives it; with disableConntrackInvalidCheck the rule is gone from
// the kernel and the host receives it (policy allows the pod's traffic).
// Switched on, off and on again on one dataplane.
func TestConntrackInvalidKernel(t *testing.T) {
	h := newKernelHost(t)
	a := h.pod("caliinva", 63)
	in := rules.Input{Endpoints: []rules.Endpoint{{Iface: a.Iface, Addrs: []netip.Addr{a.Addr}, Profiles: []string{"open"}}}, Profiles: openProfile}
	var raw net.PacketConn
	err := h.ns.Do(func(ns.NetNS) error {
		var err error
		raw, err = net.ListenPacket("ip4:icmp", a.HostAddr.String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	var sender net.PacketConn
	err = a.NS.Do(func(ns.NetNS) error {
		var err error
		sender, err = net.ListenPacket("ip4:icmp", a.Addr.String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sender.Close() })
	// send sends n ICMP port-unreachable errors quoting a UDP datagram
	// from the host to the pod that was never sent, then an echo request
	// (a new flow, allowed) as the in-order marker.
	send := func(n int) {
		t.Helper()
		quoted := []byte{0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0}
		quoted = append(quoted, a.HostAddr.AsSlice()...)
		quoted = append(quoted, a.Addr.AsSlice()...)
		quoted = append(quoted, 0x9c, 0x40, 0x1f, 0x90, 0, 8, 0, 0) // 40000 -> 8080
		unreach := icmpMessage(3, 3, append([]byte{0, 0, 0, 0}, quoted...))
		echo := icmpMessage(8, 0, []byte{0x12, 0x34, 0, 1, 'm', 'k'})
		dst := &net.IPAddr{IP: net.IP(a.HostAddr.AsSlice())}
		for i := 0; i < n; i++ {
			if _, err := sender.WriteTo(unreach, dst); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := sender.WriteTo(echo, dst); err != nil {
			t.Fatal(err)
		}
	}
	// received reads what the host got up to the marker: the number of
	// port-unreachable errors.
	received := func() int {
		t.Helper()
		buf := make([]byte, 1500)
		n := 0
		for {
			_ = raw.SetReadDeadline(time.Now().Add(20 * time.Second))
			m, _, err := raw.ReadFrom(buf)
			if err != nil {
				t.Fatalf("marker not received: %v", err)
			}
			switch buf[0] {
			case 3:
				n++
			case 8:
				if m >= 8 && buf[4] == 0x12 && buf[5] == 0x34 {
					return n
				}
			}
		}
	}
	invalidRule := regexp.MustCompile(`(?m)^-A cali-fw-caliinva .*--ctstate INVALID`)
	for _, step := range []struct {
		disable bool
		want    int
	}{{false, 0}, {true, 3}, {false, 0}} {
		h.apply(rules.Config{DefaultEndpointToHostAction: "Accept", DisableConntrackInvalid: step.disable}, in)
		if has := invalidRule.MatchString(h.run("iptables-save", "-t", "filter")); has == step.disable {
			t.Fatalf("disableConntrackInvalidCheck %v: INVALID rule in the kernel: %v", step.disable, has)
		}
		send(3)
		if got := received(); got != step.want {
			t.Fatalf("disableConntrackInvalidCheck %v: the host received %d INVALID ICMP errors, want %d", step.disable, got, step.want)
		}
	}
}

// icmpMessage is an ICMPv4 message with its checksum.
func icmpMessage(typ, code byte, body []byte) []byte {
	b := append([]byte{typ, code, 0, 0}, body...)
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	cs := ^uint16(sum)
	b[2], b[3] = byte(cs>>8), byte(cs)
	return b
}

// uplink wires an "outside" namespace to the host: host end "uplink" with
// 192.168.77.1/24, outside end with 192.168.77.2/24 and a route back to
// the pods' 10.0.0.0/8 via the host. It returns the outside namespace.
func (h *kernelHost) uplink() ns.NetNS {
	t := h.t
	t.Helper()
	out := nstest.NewNS(t)
	err := h.ns.Do(func(ns.NetNS) error {
		la := netlink.NewLinkAttrs()
		la.Name = "uplink"
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "outside"}); err != nil {
			return err
		}
		peer, err := netlink.LinkByName("outside")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetNsFd(peer, int(out.Fd())); err != nil {
			return err
		}
		l, err := netlink.LinkByName("uplink")
		if err != nil {
			return err
		}
		a, _ := netlink.ParseAddr("192.168.77.1/24")
		if err := netlink.AddrAdd(l, a); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = out.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName("outside")
		if err != nil {
			return err
		}
		a, _ := netlink.ParseAddr("192.168.77.2/24")
		if err := netlink.AddrAdd(l, a); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		_, pods, _ := net.ParseCIDR("10.0.0.0/8")
		return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: pods, Gw: net.ParseIP("192.168.77.1")})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sourceSeen listens on addr in ns and returns a function that connects
// from the pod and reports the source address the listener saw.
func sourceSeen(t *testing.T, in ns.NetNS, addr netip.AddrPort) func(p *kpod) string {
	var l net.Listener
	err := in.Do(func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp4", addr.String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	seen := make(chan string, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			seen <- c.RemoteAddr().(*net.TCPAddr).IP.String()
			c.Close()
		}
	}()
	return func(p *kpod) string {
		t.Helper()
		if err := p.dial(addr, 10*time.Second); err != nil {
			t.Fatalf("connect to %s: %v", addr, err)
		}
		return <-seen
	}
}

// TestNATOutgoingExclusionsKernel: a pod in a natOutgoing pool reaching
// an address outside the pools leaves with the host's uplink address
// (MASQUERADE) while natOutgoingExclusions is IPPoolsOnly, even when the
// address is another Calico host's; with IPPoolsAndHostIPs traffic to that
// host keeps the pod's address while traffic to a non-Calico address is
// still translated; IPPoolsOnly again translates both.
func TestNATOutgoingExclusionsKernel(t *testing.T) {
	h := newKernelHost(t)
	a := h.pod("calinata", 64)
	out := h.uplink()
	if err := out.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName("outside")
		if err != nil {
			return err
		}
		b, _ := netlink.ParseAddr("192.168.77.3/24") // an address that is no Calico host's
		return netlink.AddrAdd(l, b)
	}); err != nil {
		t.Fatal(err)
	}
	h.hosts = []string{"192.168.77.1/32", "192.168.77.2/32"}
	calicoHost := sourceSeen(t, out, netip.MustParseAddrPort("192.168.77.2:9000"))
	other := sourceSeen(t, out, netip.MustParseAddrPort("192.168.77.3:9000"))
	in := rules.Input{Endpoints: []rules.Endpoint{{Iface: a.Iface, Addrs: []netip.Addr{a.Addr}, Profiles: []string{"open"}}},
		Profiles: openProfile, NATOutgoingPools: []netip.Prefix{netip.MustParsePrefix("10.64.0.0/24")},
		AllPools: []netip.Prefix{netip.MustParsePrefix("10.64.0.0/24")}}
	for _, step := range []struct {
		exclude           bool
		toCalico, toOther string
	}{
		{false, "192.168.77.1", "192.168.77.1"},
		{true, a.Addr.String(), "192.168.77.1"},
		{false, "192.168.77.1", "192.168.77.1"},
	} {
		h.apply(rules.Config{DefaultEndpointToHostAction: "Accept", NATOutgoingExcludeHosts: step.exclude}, in)
		if got := calicoHost(a); got != step.toCalico {
			t.Fatalf("IPPoolsAndHostIPs %v: a Calico host saw source %s, want %s", step.exclude, got, step.toCalico)
		}
		if got := other(a); got != step.toOther {
			t.Fatalf("IPPoolsAndHostIPs %v: a non-Calico address saw source %s, want %s", step.exclude, got, step.toOther)
		}
	}
}

// TestNATOutgoingInterfaceKernel: with iptablesNATOutgoingInterfaceFilter
// naming the uplink (or a "+" prefix of it) traffic leaving by it is
// translated; naming another interface leaves its source alone; unset
// (the default) translates.
func TestNATOutgoingInterfaceKernel(t *testing.T) {
	h := newKernelHost(t)
	a := h.pod("calinatb", 65)
	out := h.uplink()
	seen := sourceSeen(t, out, netip.MustParseAddrPort("192.168.77.2:9000"))
	in := rules.Input{Endpoints: []rules.Endpoint{{Iface: a.Iface, Addrs: []netip.Addr{a.Addr}, Profiles: []string{"open"}}},
		Profiles: openProfile, NATOutgoingPools: []netip.Prefix{netip.MustParsePrefix("10.65.0.0/24")},
		AllPools: []netip.Prefix{netip.MustParsePrefix("10.65.0.0/24")}}
	for _, step := range []struct{ filter, want string }{
		{"", "192.168.77.1"},
		{"eth9", a.Addr.String()},
		{"upl+", "192.168.77.1"},
		{"uplink0+", a.Addr.String()},
		{"uplink", "192.168.77.1"},
	} {
		h.apply(rules.Config{DefaultEndpointToHostAction: "Accept", NATOutgoingInterface: step.filter}, in)
		if got := seen(a); got != step.want {
			t.Fatalf("iptablesNATOutgoingInterfaceFilter %q: source %s, want %s", step.filter, got, step.want)
		}
	}
}

// TestLogPrefixKernel: a Log rule's LOG target carries logPrefix
// followed by ": " (Calico's "calico-packet: " by default); a changed
// prefix replaces the rule in the kernel on the same dataplane, and the
// longest prefix validation admits (27 characters) is taken whole.
func TestLogPrefixKernel(t *testing.T) {
	h := newKernelHost(t)
	a := h.pod("calilog", 66)
	logged := map[string]rules.Profile{"logged": {
		Ingress: []api.Rule{{Action: api.ActionLog}, {Action: api.ActionAllow}},
		Egress:  []api.Rule{{Action: api.ActionAllow}},
	}}
	in := rules.Input{Endpoints: []rules.Endpoint{{Iface: a.Iface, Addrs: []netip.Addr{a.Addr}, Profiles: []string{"logged"}}}, Profiles: logged}
	prefixes := regexp.MustCompile(`--log-prefix "([^"]*)"`)
	for _, step := range []struct{ prefix, want string }{
		{"", "calico-packet: "},
		{"node1 policy/log", "node1 policy/log: "},
		{strings.Repeat("x", api.MaxLogPrefix), strings.Repeat("x", api.MaxLogPrefix) + ": "},
		{"", "calico-packet: "},
	} {
		h.apply(rules.Config{DefaultEndpointToHostAction: "Accept", LogPrefix: step.prefix}, in)
		var got []string
		for _, m := range prefixes.FindAllStringSubmatch(h.run("iptables-save", "-t", "filter"), -1) {
			got = append(got, m[1])
		}
		if len(got) != 1 || got[0] != step.want {
			t.Fatalf("logPrefix %q: LOG prefixes in the kernel %q, want [%q]", step.prefix, got, step.want)
		}
	}
}

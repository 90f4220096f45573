package rules_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// This kernel has no IPVS (CONFIG_IP_VS is not set), so no packet is
// really forwarded by IPVS here. The tests below show what the rules do
// with the packets IPVS would produce: on INPUT, a pod's packet to a node
// port at a host address is marked with the pod interface's value; on
// OUTPUT, a packet carrying a pod's value (as IPVS sends the pod's packet
// on, with SO_MARK standing in for the mark INPUT set) goes through that
// pod's egress policy and the destination pod's ingress policy.

// ipvsHost is a kernel host with kube-proxy's kube-ipvs0 interface (a
// bridge: this kernel has no dummy links) and a host address on lo.
type ipvsHost struct {
	*kernelHost
	hostAddr netip.Addr
}

func newIPVSHost(t *testing.T) *ipvsHost {
	h := &ipvsHost{kernelHost: newKernelHost(t), hostAddr: netip.MustParseAddr("192.0.2.10")}
	err := h.ns.Do(func(ns.NetNS) error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		a, _ := netlink.ParseAddr(h.hostAddr.String() + "/32")
		if err := netlink.AddrAdd(lo, a); err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	if err != nil {
		t.Fatal(err)
	}
	h.setIPVS(true)
	return h
}

// setIPVS creates or deletes kube-ipvs0.
func (h *ipvsHost) setIPVS(on bool) {
	h.t.Helper()
	err := h.ns.Do(func(ns.NetNS) error {
		if on {
			la := netlink.NewLinkAttrs()
			la.Name = rules.KubeIPVSInterface
			return netlink.LinkAdd(&netlink.Bridge{LinkAttrs: la})
		}
		l, err := netlink.LinkByName(rules.KubeIPVSInterface)
		if err != nil {
			return err
		}
		return netlink.LinkDel(l)
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// apply renders in with cfg as the agent does: IPVS mode on while the
// dataplane finds kube-ipvs0, this-host holding the host's addresses.
func (h *ipvsHost) apply(cfg rules.Config, in rules.Input) {
	h.t.Helper()
	err := h.ns.Do(func(ns.NetNS) error {
		on, err := h.dp.LinkExists(rules.KubeIPVSInterface)
		if err != nil {
			return err
		}
		cfg.KubeIPVS = on
		tb, specs := rules.Render(cfg, in)
		des := dataplane.Desired{InSync: true, Routes: map[netip.Prefix]dataplane.RouteTarget{}, KeepExternalRoutes: true,
			IPSets: map[string]dataplane.IPSet{},
			Tables: map[int]map[string][]iptables.Chain{4: {"filter": tb.Filter, "nat": tb.NAT, "mangle": tb.Mangle, "raw": tb.Raw}}}
		for _, s := range specs {
			set := dataplane.IPSet{Type: "hash:net", Family: "inet"}
			if s.Kind == rules.IPSetThisHost {
				set.Type, set.Members = "hash:ip", []string{h.hostAddr.String()}
			}
			des.IPSets[s.Name] = set
		}
		return h.dp.Apply(des)
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// listenTCPAt listens in the host namespace.
func (h *ipvsHost) listenTCPAt(port int) {
	h.t.Helper()
	acceptTCP(h.t, h.ns, netip.AddrPortFrom(h.hostAddr, uint16(port)))
}

// sendUDP sends payload from the host namespace to dst on a new socket:
// with a mark, from src (bound with IP_TRANSPARENT: the pod's address, as
// IPVS forwards the pod's packet) and carrying the mark (SO_MARK), the
// way an IPVS-forwarded packet leaves; without, a plain host packet.
func (h *ipvsHost) sendUDP(src netip.Addr, mark uint32, dst netip.AddrPort, payload string) {
	h.t.Helper()
	err := h.ns.Do(func(ns.NetNS) error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if mark != 0 {
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, int(mark)); err != nil {
				return fmt.Errorf("SO_MARK: %w", err)
			}
			if err := unix.SetsockoptInt(fd, unix.SOL_IP, unix.IP_TRANSPARENT, 1); err != nil {
				return fmt.Errorf("IP_TRANSPARENT: %w", err)
			}
			if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: src.As4()}); err != nil {
				return fmt.Errorf("bind %s: %w", src, err)
			}
		}
		err = unix.Sendto(fd, []byte(payload), 0, &unix.SockaddrInet4{Addr: dst.Addr().As4(), Port: int(dst.Port())})
		if errors.Is(err, unix.EPERM) && mark != 0 {
			return nil // a filter OUTPUT rule dropped it: the receiver decides what the test sees
		}
		if err != nil {
			return fmt.Errorf("sending from %s (mark %#x) to %s: %w", src, mark, dst, err)
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// listenUDP listens in the pod and returns its socket.
func (p *kpod) listenUDP(port int) net.PacketConn {
	p.t.Helper()
	var c net.PacketConn
	err := p.NS.Do(func(ns.NetNS) error {
		var err error
		c, err = net.ListenPacket("udp4", netip.AddrPortFrom(p.Addr, uint16(port)).String())
		return err
	})
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { c.Close() })
	return c
}

// TestIPVSKernelPolicy: in IPVS mode (kube-ipvs0 present) with the default
// mask, a pod's TCP connection to a node port at a host address gets the
// pod interface's endpoint value on INPUT (a test rule after our hook
// counts packets with exactly that value) and is left to the host's INPUT
// rules, while the same pod's connection to a port outside the node ports
// meets defaultEndpointToHostAction Drop. A packet leaving the host with
// pod A's value and address (as IPVS forwards it) reaches pod B while
// both pods' policies allow it, and not when A's egress policy or B's
// ingress policy denies it. Changing kubeNodePortRanges moves the node
// ports live; removing kube-ipvs0 removes every IPVS rule.
func TestIPVSKernelPolicy(t *testing.T) {
	h := newIPVSHost(t)
	a, b := h.pod("caliipvsa", 71), h.pod("caliipvsb", 72)
	h.listenTCPAt(30080)
	h.listenTCPAt(8080)
	udp := b.listenUDP(9000)

	field := rules.EndpointMarkField(0)
	marks := rules.EndpointMarks(field, []string{a.Iface, b.Iface}, nil)
	markA := marks[a.Iface]
	if markA == 0 || markA&^field != 0 {
		t.Fatalf("pod A's value %#x is not in the field %#x", markA, field)
	}
	// Counts packets carrying exactly A's value after cali-INPUT returned
	// them to INPUT (appended: our hook stays first).
	counter := fmt.Sprintf("-m mark --mark %#x/%#x", markA, field)
	h.run("iptables", append([]string{"-A", "INPUT", "-p", "tcp", "--dport", "30080"}, strings.Fields(counter)...)...)
	counted := func() string {
		out := h.run("iptables", "-L", "INPUT", "-v", "-n", "-x")
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "dpt:30080") && strings.Contains(l, "mark match") {
				return strings.Fields(l)[0]
			}
		}
		t.Fatalf("counter rule gone:\n%s", out)
		return ""
	}

	udpDeny := func() api.Rule {
		p := api.ProtocolFromString("UDP")
		return api.Rule{Action: api.ActionDeny, Protocol: &p, Destination: api.EntityRule{Ports: []api.Port{api.SinglePort(9000)}}}
	}
	deny := rules.PolicyKey{Name: "deny-udp-9000"}
	input := func(egressA, ingressB bool) rules.Input {
		in := rules.Input{
			Endpoints: []rules.Endpoint{
				{Iface: a.Iface, Addrs: []netip.Addr{a.Addr}, Profiles: []string{"open"}},
				{Iface: b.Iface, Addrs: []netip.Addr{b.Addr}, Profiles: []string{"open"}},
			},
			Policies: map[rules.PolicyKey]rules.Policy{deny: {Key: deny, Ingress: []api.Rule{udpDeny()}, Egress: []api.Rule{udpDeny()}}},
			Profiles: openProfile,
		}
		if egressA {
			in.Endpoints[0].EgressPolicies = []rules.PolicyKey{deny}
		}
		if ingressB {
			in.Endpoints[1].IngressPolicies = []rules.PolicyKey{deny}
		}
		return in
	}
	nodePort := netip.AddrPortFrom(h.hostAddr, 30080)
	other := netip.AddrPortFrom(h.hostAddr, 8080)

	// reached sends a datagram with A's value and address to B, then a
	// plain host datagram (host to pod traffic is not policed) as the
	// in-order marker, and reports whether B got the first.
	seq := 0
	reached := func() bool {
		t.Helper()
		seq++
		probe, marker := fmt.Sprintf("probe-%d", seq), fmt.Sprintf("marker-%d", seq)
		h.sendUDP(a.Addr, markA, netip.AddrPortFrom(b.Addr, 9000), probe)
		h.sendUDP(netip.Addr{}, 0, netip.AddrPortFrom(b.Addr, 9000), marker)
		buf := make([]byte, 100)
		got := false
		for {
			_ = udp.SetReadDeadline(time.Now().Add(20 * time.Second))
			n, _, err := udp.ReadFrom(buf)
			if err != nil {
				t.Fatalf("marker %s not received: %v", marker, err)
			}
			switch string(buf[:n]) {
			case probe:
				got = true
			case marker:
				return got
			}
		}
	}

	// Default node ports, both pods open.
	h.apply(rules.Config{}, input(false, false))
	if err := a.dial(nodePort, 5*time.Second); err != nil {
		t.Fatalf("node port %s from pod A: %v (IPVS mode leaves it to INPUT)", nodePort, err)
	}
	if n := counted(); n == "0" {
		t.Fatalf("no packet to the node port carried pod A's value %#x on INPUT", markA)
	}
	if err := a.dial(other, 2*time.Second); !timedOut(err) {
		t.Fatalf("port 8080 (not a node port) from pod A: %v, want a timeout (defaultEndpointToHostAction Drop)", err)
	}
	if !reached() {
		t.Fatalf("a packet with pod A's value did not reach pod B with both pods' policies open")
	}

	// A's egress policy denies, then B's ingress policy, then neither.
	h.apply(rules.Config{}, input(true, false))
	if reached() {
		t.Fatalf("pod A's egress policy denies UDP 9000, yet its IPVS-forwarded packet reached pod B")
	}
	h.apply(rules.Config{}, input(false, true))
	if reached() {
		t.Fatalf("pod B's ingress policy denies UDP 9000, yet pod A's IPVS-forwarded packet reached it")
	}
	h.apply(rules.Config{}, input(false, false))
	if !reached() {
		t.Fatalf("policies open again: the packet did not reach pod B")
	}

	// kubeNodePortRanges without 30080: the connection is now policed as
	// pod-to-host traffic (dropped); with it again, it connects.
	h.apply(rules.Config{KubeNodePortRanges: rules.NodePortRanges{api.PortRange(31000, 31100), api.SinglePort(32000)}}, input(false, false))
	if f := h.run("iptables-save", "-t", "filter"); !strings.Contains(f, "--dports 31000:31100,32000") || strings.Contains(f, "30000:32767") {
		t.Fatalf("kubeNodePortRanges 31000:31100,32000 not in the kernel:\n%s", f)
	}
	if err := a.dial(nodePort, 2*time.Second); !timedOut(err) {
		t.Fatalf("30080 outside kubeNodePortRanges: %v, want a timeout", err)
	}
	h.apply(rules.Config{KubeNodePortRanges: rules.NodePortRanges{api.PortRange(30000, 30100)}}, input(false, false))
	if err := a.dial(nodePort, 5*time.Second); err != nil {
		t.Fatalf("30080 inside kubeNodePortRanges 30000:30100: %v", err)
	}

	// Without kube-ipvs0 nothing IPVS-related is left, and the node port
	// is pod-to-host traffic like any other.
	h.setIPVS(false)
	h.apply(rules.Config{}, input(false, false))
	var ours []string // our rules: the test's counter in INPUT also names the field
	for _, l := range strings.Split(h.run("iptables-save", "-t", "filter"), "\n") {
		if strings.Contains(l, "cali") {
			ours = append(ours, l)
		}
	}
	f := strings.Join(ours, "\n")
	for _, word := range []string{"forward-check", "endpoint-mark", "cali-sm-", "this-host", fmt.Sprintf("%#x", field)} {
		if strings.Contains(f, word) {
			t.Fatalf("kube-ipvs0 gone, yet %q is in the kernel:\n%s", word, f)
		}
	}
	if sets := h.run("ipset", "list", "-n"); strings.Contains(sets, "this-host") {
		t.Fatalf("kube-ipvs0 gone, yet the this-host set is left:\n%s", sets)
	}
	if err := a.dial(nodePort, 2*time.Second); !timedOut(err) {
		t.Fatalf("no IPVS mode: node port from pod A: %v, want a timeout (defaultEndpointToHostAction Drop)", err)
	}
}

package cni

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/calico-aio/calico-aio/internal/rtproto"
)

// The "169.254.1.1 trick": the pod's default gateway is a link-local
// address nobody owns; the host veth answers ARP for it by proxy ARP.
var (
	gatewayV4 = net.IPv4(169, 254, 1, 1)
	hostMAC   = net.HardwareAddr{0xee, 0xee, 0xee, 0xee, 0xee, 0xee}
	// hostLinkLocal is the EUI-64 link-local address of a veth with hostMAC:
	// the pod's IPv6 default gateway.
	hostLinkLocal = net.ParseIP("fe80::ecee:eeff:feee:eeee")
)

// podWiring is what ADD builds for one pod interface.
type podWiring struct {
	netns  string
	ifName string
	// hostVeth is the host end's name; setup chooses it by iface.
	hostVeth string
	iface    HostIface
	mtu      int
	addrs    []netip.Addr
	// allowForwarding sets ip_forward inside the pod.
	allowForwarding bool
	// podMAC, when set, is the pod interface's MAC (else the kernel's choice).
	podMAC net.HardwareAddr
	// routes, when set, replace the pod's default routes (netconf_keys.go).
	routes []netip.Prefix
	// queues is the veth's number of TX and RX queues (num_queues; 0: one).
	queues int
}

// InterfaceTakenError says the pod's interface name already exists in the pod namespace.
type InterfaceTakenError struct{ Name, Netns string }

func (e *InterfaceTakenError) Error() string {
	return fmt.Sprintf("interface %q already exists in network namespace %s", e.Name, e.Netns)
}

// RouteTakenError says a host route for the workload's address points
// elsewhere: overwriting it would steal another workload's traffic.
type RouteTakenError struct {
	Addr netip.Addr
	Dev  string
}

func (e *RouteTakenError) Error() string {
	return fmt.Sprintf("a host route for %s already exists via interface %s (another workload holds this address?)", e.Addr, e.Dev)
}

// setup chooses the host end's name (w.hostVeth), creates the veth pair
// and configures both ends; on error it removes what it created. It
// returns the pod-side MAC.
func (w *podWiring) setup() (mac string, err error) {
	return w.finish(w.start())
}

// pendingPair is a veth pair start is making, which finish configures or
// abandon removes.
type pendingPair struct {
	done     chan struct{}
	target   ns.NetNS
	veth     *netlink.Veth
	hostVeth string
	err      error
	// settled: finish has taken the pair (configured, or removed it).
	settled bool
}

// start makes the veth pair in the background (the host end's name
// chosen, a leftover of this pod removed, the pod end in its namespace):
// nothing of it depends on the pod's addresses, so an ADD makes it while
// they are allocated. Every pair started is finished or abandoned.
func (w *podWiring) start() *pendingPair {
	p := &pendingPair{done: make(chan struct{})}
	// The host end goes where the caller is: its thread's namespace (a
	// caller inside ns.Do, such as a test, is elsewhere than the process).
	here, err := ns.GetCurrentNS()
	if err != nil {
		p.err = fmt.Errorf("the caller's network namespace: %w", err)
		close(p.done)
		return p
	}
	pw := *w // the goroutine's own copy: w is the caller's meanwhile
	go func() {
		defer close(p.done)
		defer here.Close()
		target, err := ns.GetNS(pw.netns)
		if err != nil {
			p.err = fmt.Errorf("opening network namespace %s: %w", pw.netns, err)
			return
		}
		p.err = here.Do(func(ns.NetNS) error {
			var err error
			p.veth, err = pw.createPair(target)
			return err
		})
		if p.err != nil {
			_ = target.Close()
			return
		}
		p.target, p.hostVeth = target, pw.hostVeth
	}()
	return p
}

// abandon waits for the pair and removes it, unless finish took it.
func (p *pendingPair) abandon() {
	<-p.done
	if p.settled || p.err != nil {
		return
	}
	p.settled = true
	_ = netlink.LinkDel(p.veth)
	_ = p.target.Close()
}

// finish waits for the pair and configures both ends with w.addrs; on
// error it removes the pair. It returns the pod-side MAC.
func (w *podWiring) finish(p *pendingPair) (mac string, err error) {
	<-p.done
	if p.err != nil {
		return "", p.err
	}
	p.settled = true
	w.hostVeth = p.hostVeth
	target := p.target
	defer target.Close()
	defer func() {
		if err != nil {
			_ = netlink.LinkDel(p.veth)
		}
	}()
	if err := w.checkHostRoutes(); err != nil {
		return "", err
	}
	host, err := netlink.LinkByName(w.hostVeth)
	if err != nil {
		return "", fmt.Errorf("host veth %s: %w", w.hostVeth, err)
	}
	if err := w.hostSysctls(); err != nil {
		return "", err
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return "", fmt.Errorf("setting %s up: %w", w.hostVeth, err)
	}
	err = target.Do(func(ns.NetNS) error {
		m, err := w.configurePod()
		mac = m
		return err
	})
	if err != nil {
		return "", err
	}
	if err := w.addHostRoutes(host); err != nil {
		return "", err
	}
	return mac, nil
}

// createPair makes the veth pair under a name HostIface chooses; a
// concurrent workload taking the same name first makes it choose again.
func (w *podWiring) createPair(target ns.NetNS) (*netlink.Veth, error) {
	for attempt := 0; ; attempt++ {
		w.iface.Netns, w.iface.IfName = w.netns, w.ifName
		choice, err := w.iface.Choose()
		if err != nil {
			return nil, err
		}
		w.hostVeth = choice.Name
		// This pod's own leftover (an earlier, failed attempt) goes first.
		if err := choice.RemoveLeftover(); err != nil {
			return nil, err
		}
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: w.hostVeth, MTU: w.mtu, HardwareAddr: hostMAC, NumTxQueues: w.queues, NumRxQueues: w.queues},
			PeerName:      w.ifName,
			PeerNamespace: netlink.NsFd(int(target.Fd())),
		}
		err = netlink.LinkAdd(veth)
		if err == nil {
			return veth, nil
		}
		if !errors.Is(err, syscall.EEXIST) {
			return nil, fmt.Errorf("creating veth %s/%s: %w", w.hostVeth, w.ifName, err)
		}
		podSide := target.Do(func(ns.NetNS) error {
			_, err := netlink.LinkByName(w.ifName)
			return err
		})
		if podSide == nil {
			return nil, &InterfaceTakenError{Name: w.ifName, Netns: w.netns}
		}
		if attempt == 2 {
			return nil, fmt.Errorf("creating veth %s/%s: %w", w.hostVeth, w.ifName, err)
		}
	}
}

func (w podWiring) has4() bool {
	for _, a := range w.addrs {
		if a.Is4() {
			return true
		}
	}
	return false
}

func (w podWiring) has6() bool {
	for _, a := range w.addrs {
		if a.Is6() {
			return true
		}
	}
	return false
}

func writeSysctl(path, value string) error {
	if err := os.WriteFile(filepath.Join("/proc/sys", path), []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", path, value, err)
	}
	return nil
}

// HostVethSysctls are the settings of a workload's host-side interface
// (path under /proc/sys, value): proxy ARP with no delay, forwarding,
// route_localnet; for IPv6 proxy NDP, no RA, no DAD, forwarding.
func HostVethSysctls(iface string, v6 bool) [][2]string {
	settings := [][2]string{
		{"net/ipv4/conf/" + iface + "/proxy_arp", "1"},
		{"net/ipv4/neigh/" + iface + "/proxy_delay", "0"},
		{"net/ipv4/conf/" + iface + "/forwarding", "1"},
		{"net/ipv4/conf/" + iface + "/route_localnet", "1"},
	}
	if v6 {
		settings = append(settings,
			[2]string{"net/ipv6/conf/" + iface + "/disable_ipv6", "0"},
			[2]string{"net/ipv6/conf/" + iface + "/accept_dad", "0"},
			[2]string{"net/ipv6/conf/" + iface + "/proxy_ndp", "1"},
			[2]string{"net/ipv6/conf/" + iface + "/accept_ra", "0"},
			[2]string{"net/ipv6/conf/" + iface + "/forwarding", "1"})
	}
	return settings
}

// SetHostVethSysctls writes HostVethSysctls.
func SetHostVethSysctls(iface string, v6 bool) error {
	for _, s := range HostVethSysctls(iface, v6) {
		if err := writeSysctl(s[0], s[1]); err != nil {
			return err
		}
	}
	return nil
}

func (w podWiring) hostSysctls() error { return SetHostVethSysctls(w.hostVeth, w.has6()) }

// configurePod runs inside the pod namespace: addresses, link up, routes.
func (w podWiring) configurePod() (string, error) {
	link, err := netlink.LinkByName(w.ifName)
	if err != nil {
		return "", fmt.Errorf("pod interface %s: %w", w.ifName, err)
	}
	if w.has6() {
		if err := writeSysctl("net/ipv6/conf/all/disable_ipv6", "0"); err != nil {
			return "", err
		}
		_ = writeSysctl("net/ipv6/conf/"+w.ifName+"/accept_dad", "0")
	}
	if w.allowForwarding {
		if err := writeSysctl("net/ipv4/ip_forward", "1"); err != nil {
			return "", err
		}
	}
	for _, a := range w.addrs {
		if err := netlink.AddrAdd(link, podAddr(a)); err != nil {
			return "", fmt.Errorf("adding %s to %s: %w", a, w.ifName, err)
		}
	}
	if w.podMAC != nil {
		if err := netlink.LinkSetHardwareAddr(link, w.podMAC); err != nil {
			return "", fmt.Errorf("setting MAC %s on %s: %w", w.podMAC, w.ifName, err)
		}
		if link, err = netlink.LinkByName(w.ifName); err != nil {
			return "", fmt.Errorf("pod interface %s: %w", w.ifName, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return "", fmt.Errorf("setting %s up: %w", w.ifName, err)
	}
	for _, r := range podRoutes(link.Attrs().Index, w.has4(), w.has6(), w.routes) {
		if err := netlink.RouteAdd(r); err != nil {
			return "", fmt.Errorf("adding pod route %s via %v: %w", r.Dst, r.Gw, err)
		}
	}
	return link.Attrs().HardwareAddr.String(), nil
}

// gatewayRoutes are the pod's routes for its address families: IPv4 a
// link route to 169.254.1.1 and the default via it; IPv6 the default via
// the host veth's link-local address.
func gatewayRoutes(idx int, v4, v6 bool) []*netlink.Route {
	var routes []*netlink.Route
	if v4 {
		routes = append(routes,
			&netlink.Route{LinkIndex: idx, Dst: &net.IPNet{IP: gatewayV4, Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK},
			&netlink.Route{LinkIndex: idx, Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, Gw: gatewayV4})
	}
	if v6 {
		routes = append(routes, &netlink.Route{LinkIndex: idx, Dst: &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}, Gw: hostLinkLocal})
	}
	return routes
}

// podRoutes are gatewayRoutes, or, with custom routes, the link route to
// 169.254.1.1 (for IPv4) and each custom route of the pod's families via
// the same gateway as the default.
func podRoutes(idx int, v4, v6 bool, custom []netip.Prefix) []*netlink.Route {
	if len(custom) == 0 {
		return gatewayRoutes(idx, v4, v6)
	}
	var routes []*netlink.Route
	if v4 {
		routes = append(routes, gatewayRoutes(idx, true, false)[0])
	}
	for _, p := range custom {
		gw := hostLinkLocal
		if p.Addr().Is4() {
			gw = gatewayV4
		}
		if (p.Addr().Is4() && !v4) || (p.Addr().Is6() && !v6) {
			continue
		}
		routes = append(routes, &netlink.Route{LinkIndex: idx, Dst: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}, Gw: gw})
	}
	return routes
}

func hostPrefix(a netip.Addr) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
}

// podAddr is a workload address for its interface. An IPv6 one skips
// duplicate address detection (IPAM made it unique): a tentative address
// cannot be bound, so a pod that starts listening at once would fail with
// "cannot assign requested address" for a second or so. The accept_dad
// sysctl says the same, but only for addresses added after it took effect.
func podAddr(a netip.Addr) *netlink.Addr {
	addr := &netlink.Addr{IPNet: hostPrefix(a)}
	if a.Is6() {
		addr.Flags = unix.IFA_F_NODAD
	}
	return addr
}

// checkHostRoutes refuses a pod address that the host already routes to
// another interface: overwriting it would steal another workload's traffic.
func (w podWiring) checkHostRoutes() error { return CheckHostRoutes(w.addrs, w.hostVeth) }

// CheckHostRoutes refuses, with a *RouteTakenError, an address the host
// already routes to an interface other than own (the Docker network
// driver's endpoints too).
func CheckHostRoutes(addrs []netip.Addr, own string) error {
	for _, a := range addrs {
		dev, err := HostRouteDev(a)
		if err != nil {
			return err
		}
		if dev != "" && dev != own {
			return &RouteTakenError{Addr: a, Dev: dev}
		}
	}
	return nil
}

// HostRouteDev names the interface of the host's route to exactly a (a
// /32 or /128) that a packet to a takes: "" when it takes a wider route or
// none (the interface's index when it is gone). It asks the kernel for the
// route the address matches (ip route get fibmatch), one lookup whatever
// the number of pods, not a dump of the routing table. A lookup that ends
// on a route to no interface fails with that route type's error (a
// blackhole, such as calico-node's for the node's blocks: EINVAL;
// unreachable, prohibit, throw; no route at all): none of them leads to
// an interface.
func HostRouteDev(a netip.Addr) (string, error) {
	routes, err := netlink.RouteGetWithOptions(a.AsSlice(), &netlink.RouteGetOptions{FIBMatch: true})
	for _, noDev := range []error{unix.EINVAL, unix.EHOSTUNREACH, unix.ENETUNREACH, unix.EACCES, unix.EAGAIN} {
		if errors.Is(err, noDev) {
			return "", nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("looking up the host route to %s: %w", a, err)
	}
	for _, r := range routes {
		if r.Dst == nil || r.Dst.String() != hostPrefix(a).String() {
			continue
		}
		if l, err := netlink.LinkByIndex(r.LinkIndex); err == nil {
			return l.Attrs().Name, nil
		}
		return fmt.Sprint(r.LinkIndex), nil
	}
	return "", nil
}

func (w podWiring) addHostRoutes(host netlink.Link) error {
	for _, a := range w.addrs {
		r := &netlink.Route{LinkIndex: host.Attrs().Index, Dst: hostPrefix(a), Scope: netlink.SCOPE_LINK, Protocol: rtproto.Workload}
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("adding host route %s dev %s: %w", a, w.hostVeth, err)
		}
	}
	return nil
}

package node

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"sync"
)

// skippedIfaces are never picked by first-found.
var skippedIfaces = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(lo|docker.*|cali.*|veth.*|br-.*|cni.*|virbr.*|vxlan.*|tunl.*|kube-ipvs.*)$`)
})

// ifaceAddrs lists interfaces with their addresses (prefixes).
type ifaceAddrs struct {
	name  string
	addrs []netip.Prefix
}

func systemIfaces() ([]ifaceAddrs, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	var out []ifaceAddrs
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, err := i.Addrs()
		if err != nil {
			continue
		}
		ia := ifaceAddrs{name: i.Name}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if p, ok := netipPrefix(n); ok {
					ia.addrs = append(ia.addrs, p)
				}
			}
		}
		out = append(out, ia)
	}
	return out, nil
}

func netipPrefix(n *net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a, ones), true
}

// autodetect picks this node's address of one family by Calico's methods:
// first-found, interface=REGEX, can-reach=ADDR, cidr=CIDR[,CIDR].
func autodetect(method string, v6 bool, ifaces []ifaceAddrs) (netip.Prefix, error) {
	want := func(p netip.Prefix) bool {
		a := p.Addr()
		return a.Is6() == v6 && !a.IsLoopback() && !a.IsLinkLocalUnicast() && !a.IsMulticast()
	}
	kind, arg, _ := strings.Cut(method, "=")
	switch kind {
	case "", "first-found":
		for _, i := range ifaces {
			if skippedIfaces().MatchString(i.name) {
				continue
			}
			for _, p := range i.addrs {
				if want(p) {
					return p, nil
				}
			}
		}
	case "interface":
		re, err := regexp.Compile("^(" + arg + ")$")
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("IP autodetection %q: bad regex: %w", method, err)
		}
		for _, i := range ifaces {
			if !re.MatchString(i.name) {
				continue
			}
			for _, p := range i.addrs {
				if want(p) {
					return p, nil
				}
			}
		}
	case "cidr":
		var cidrs []netip.Prefix
		for _, c := range strings.Split(arg, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(c))
			if err != nil {
				return netip.Prefix{}, fmt.Errorf("IP autodetection %q: %w", method, err)
			}
			cidrs = append(cidrs, p)
		}
		for _, i := range ifaces {
			for _, p := range i.addrs {
				for _, c := range cidrs {
					if want(p) && c.Contains(p.Addr()) {
						return p, nil
					}
				}
			}
		}
	case "can-reach":
		return canReach(arg, v6, ifaces)
	default:
		return netip.Prefix{}, fmt.Errorf("IP autodetection method %q is not one of first-found, interface=, can-reach=, cidr=", method)
	}
	return netip.Prefix{}, fmt.Errorf("IP autodetection %q found no IPv%s address", method, map[bool]string{false: "4", true: "6"}[v6])
}

// canReach finds the local address the kernel would use towards dest (a
// UDP "connect" sends nothing).
func canReach(dest string, v6 bool, ifaces []ifaceAddrs) (netip.Prefix, error) {
	host := dest
	if a, err := netip.ParseAddr(dest); err == nil {
		host = netip.AddrPortFrom(a, 53).String()
	} else {
		host = net.JoinHostPort(dest, "53")
	}
	network := "udp4"
	if v6 {
		network = "udp6"
	}
	c, err := net.Dial(network, host)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("IP autodetection can-reach=%s: %w", dest, err)
	}
	defer c.Close()
	local := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	for _, i := range ifaces {
		for _, p := range i.addrs {
			if p.Addr() == local {
				return p, nil
			}
		}
	}
	return netip.PrefixFrom(local, local.BitLen()), nil
}

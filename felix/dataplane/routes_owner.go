package dataplane

import (
	"net/netip"
	"slices"
	"strings"
	"syscall"

	"github.com/calico-aio/calico-aio/internal/rtproto"
)

// Which routes are the route manager's. Blackhole, overlay and BGP routes
// carry our own protocols (rtproto). Routes to local workloads carry
// FelixConfiguration deviceRouteProtocol (default rtproto.Workload): a
// route on a workload interface (interfacePrefix) with that protocol, or
// with one this process used before a change, is ours too. A route with
// any other protocol, or on any other interface, is someone else's.

// IfacePrefixes are the name prefixes of workload interfaces
// (FelixConfiguration interfacePrefix, Calico's default "cali").
type IfacePrefixes []string

// DefaultIfacePrefixes is Calico's default interfacePrefix.
var DefaultIfacePrefixes = IfacePrefixes{"cali"}

// ParseIfacePrefixes reads interfacePrefix ("cali,tap"); empty is the
// default.
func ParseIfacePrefixes(s string) IfacePrefixes {
	var out IfacePrefixes
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return DefaultIfacePrefixes
	}
	return out
}

// Match reports whether name is a workload interface's.
func (p IfacePrefixes) Match(name string) bool {
	if name == "" {
		return false
	}
	for _, pre := range p {
		if strings.HasPrefix(name, pre) {
			return true
		}
	}
	return false
}

// setDevice records the protocol of workload routes (0: rtproto.Workload)
// and the workload interface prefixes; a change makes the next Apply
// re-read and reprogram.
func (m *routeManager) setDevice(proto int, prefixes IfacePrefixes) {
	if proto == 0 {
		proto = rtproto.Workload
	}
	if len(prefixes) == 0 {
		prefixes = DefaultIfacePrefixes
	}
	if proto != m.devProto || !slices.Equal(prefixes, m.prefixes) {
		m.dirty = true
	}
	m.devProto, m.prefixes = proto, prefixes
	m.devProtos[proto] = true
}

// ours reports whether a kernel route with proto to dst on iface (""
// for none) is the manager's.
func (m *routeManager) ours(proto int, iface string, dst netip.Prefix) bool {
	if proto == rtproto.Workload || proto == rtproto.BGP {
		return true
	}
	// A device route: a host route on a workload interface with a
	// protocol we program workload routes with.
	// (An interface routed to before interfacePrefix dropped it counts.)
	return m.devProtos[proto] && (m.prefixes.Match(iface) || m.known[iface]) && dst.IsSingleIP()
}

// foreignOnWorkload reports whether a route that is not ours sits on a
// workload interface (removed after the grace period unless
// removeExternalRoutes is false). The kernel's own routes there (the
// IPv6 link-local prefix) are left alone.
func (m *routeManager) foreignOnWorkload(proto int, iface string) bool {
	return m.prefixes.Match(iface) && proto != syscall.RTPROT_KERNEL
}

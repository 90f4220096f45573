// Package dataplane owns this node's kernel state: one loop, managers that
// record desired state cheaply and reconcile it in a batched apply against
// what the kernel really has.
package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/calico-aio/calico-aio/internal/rtproto"
)

// RouteTarget is where a desired route goes.
type RouteTarget struct {
	Iface     string       // workload route: dev <iface> scope link
	Blackhole bool         // an affine block's blackhole
	Via       []netip.Addr // BGP-learned: next hops (several: ECMP)
	// OnLink with Iface and one Via: an overlay route, via <vtep> dev
	// <iface> onlink (protocol 80, as workload routes).
	OnLink bool
	// Proto overrides the route's protocol (rtproto.Workload or
	// rtproto.BGP); 0 means by kind: Via alone is BGP's, the rest the
	// agent's. A route the agent computes itself (a CrossSubnet direct
	// route) carries the agent's; one learned over BGP put over a
	// tunnel keeps BGP's.
	Proto int
	// Src, when valid, is the route's preferred source address (workload
	// routes: FelixConfiguration deviceRouteSourceAddress(IPv6)).
	Src netip.Addr
	// Metric is the route's priority (workload routes: FelixConfiguration
	// ipv4/ipv6NormalRoutePriority); 0 is the kernel's default (1024 for
	// IPv6). routes_metric.go.
	Metric int
}

// protocol is the rtnetlink protocol the route is programmed with.
func (t RouteTarget) protocol() int {
	switch {
	case t.Proto != 0:
		return t.Proto
	case !t.Blackhole && t.Iface == "":
		return rtproto.BGP
	}
	return rtproto.Workload
}

func (t RouteTarget) String() string {
	if t.Metric != 0 {
		u := t
		u.Metric = 0
		return u.String() + " metric " + strconv.Itoa(t.Metric)
	}
	if t.Src.IsValid() {
		u := t
		u.Src = netip.Addr{}
		return u.String() + " src " + t.Src.String()
	}
	switch {
	case t.Blackhole:
		return "blackhole"
	case t.OnLink && t.Iface != "" && len(t.Via) == 1:
		return "via " + t.Via[0].String() + " dev " + t.Iface + " onlink"
	case t.Iface != "":
		return "dev " + t.Iface
	}
	parts := make([]string, len(t.Via))
	for i, v := range t.Via {
		parts[i] = v.String()
	}
	return "via " + strings.Join(parts, ",")
}

// routeManager keeps the main table's routes with our protocol numbers
// (routes_owner.go: also deviceRouteProtocol's on workload interfaces)
// equal to the desired set. It never touches routes with other protocols,
// except unknown routes on workload interfaces (interfacePrefix, cali* by
// default), which it removes only after a grace period and only once the
// datastore view is in sync. It never reads any table but main.
type routeManager struct {
	desired map[netip.Prefix]RouteTarget
	// dirty: the next Apply reads the whole table back (start-up, resync,
	// a device or setting change, a failure). Otherwise only the
	// interfaces in touched are read back (routes_incr.go).
	dirty     bool
	touched   map[string]bool
	inSync    bool
	grace     time.Duration
	strangers map[netip.Prefix]stranger // foreign routes on cali* interfaces
	// keepForeign leaves foreign routes on cali* interfaces alone
	// (FelixConfiguration removeExternalRoutes false).
	keepForeign bool
	// known holds the workload interfaces some desired route has named.
	// A workload route to an interface not known yet is a new pod's,
	// written by the CNI plugin before its endpoint reached the agent: it
	// gets the grace period instead of being deleted at once.
	known map[string]bool
	now   func() time.Time
	// devProto is the protocol of workload routes now; devProtos every one
	// this process has used (routes_owner.go); prefixes name the workload
	// interfaces.
	devProto  int
	devProtos map[int]bool
	prefixes  IfacePrefixes
	nl        *nlHandle
	// extras are our routes read back for a prefix that has another one
	// of ours with a different metric (routes_metric.go).
	extras []kernelRoute
	// sync is routeSyncDisabled (routes_sync.go).
	sync RouteSync
}

func newRouteManager(grace time.Duration) *routeManager {
	return &routeManager{desired: map[netip.Prefix]RouteTarget{}, grace: grace, strangers: map[netip.Prefix]stranger{}, touched: map[string]bool{},
		known: map[string]bool{}, now: time.Now, dirty: true,
		devProto: rtproto.Workload, devProtos: map[int]bool{rtproto.Workload: true}, prefixes: DefaultIfacePrefixes, nl: newNLHandle()}
}

// SetDesired records the full desired set (no kernel I/O); it marks the
// manager dirty only when something changed.
func (m *routeManager) SetDesired(d map[netip.Prefix]RouteTarget, inSync bool) {
	for p, t := range d {
		if len(t.Via) > 1 && !sort.SliceIsSorted(t.Via, func(i, j int) bool { return t.Via[i].Less(t.Via[j]) }) {
			t.Via = append([]netip.Addr(nil), t.Via...)
			sort.Slice(t.Via, func(i, j int) bool { return t.Via[i].Less(t.Via[j]) })
			d[p] = t
		}
	}
	if inSync != m.inSync {
		m.dirty = true
	}
	if !m.dirty && !m.noteChanges(d) {
		return
	}
	m.desired, m.inSync = d, inSync
	for _, t := range d {
		if m.prefixes.Match(t.Iface) {
			m.known[t.Iface] = true
		}
	}
}

// kernelRoute is a route we read back.
type kernelRoute struct {
	route  netlink.Route
	target RouteTarget
	proto  int
}

func (m *routeManager) readKernel() (map[netip.Prefix]kernelRoute, error) {
	out := map[netip.Prefix]kernelRoute{}
	m.extras = m.extras[:0]
	names := map[int]string{}
	links, err := m.nl.linkDump()
	if err != nil {
		return nil, err
	}
	for name, l := range links {
		names[l.Attrs().Index] = name
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := listRoutes(m.nl.h, fam)
		if err != nil {
			return nil, err
		}
		m.collect(out, routes, names)
	}
	return out, nil
}

// collect records in out the routes of the manager's (and foreign ones on
// workload interfaces) among routes; names maps interface indexes to
// names.
func (m *routeManager) collect(out map[netip.Prefix]kernelRoute, routes []netlink.Route, names map[int]string) {
	for _, r := range routes {
		if r.Dst == nil || r.Table != syscall.RT_TABLE_MAIN {
			continue
		}
		p, ok := toPrefix(r.Dst)
		if !ok {
			continue
		}
		kr := kernelRoute{route: r, proto: int(r.Protocol), target: readTarget(r, names)}
		if !m.ours(kr.proto, kr.target.Iface, p) && !m.foreignOnWorkload(kr.proto, kr.target.Iface) {
			continue // someone else's, or the kernel's own (the IPv6 link-local prefix route)
		}
		m.keepOne(out, p, kr)
	}
}

// readTarget is where a kernel route goes, as a RouteTarget.
func readTarget(r netlink.Route, names map[int]string) RouteTarget {
	var t RouteTarget
	switch {
	case r.Type == syscall.RTN_BLACKHOLE:
		t.Blackhole = true
	case r.LinkIndex != 0 && r.Gw == nil && len(r.MultiPath) == 0:
		t.Iface = names[r.LinkIndex]
		if a, ok := netip.AddrFromSlice(r.Src); ok {
			t.Src = a.Unmap()
		}
	case r.LinkIndex != 0 && r.Gw != nil && r.Flags&unix.RTNH_F_ONLINK != 0:
		a, _ := netip.AddrFromSlice(r.Gw)
		t = RouteTarget{Iface: names[r.LinkIndex], Via: []netip.Addr{a.Unmap()}, OnLink: true}
	default:
		if a, ok := netip.AddrFromSlice(r.Gw); ok {
			t.Via = append(t.Via, a.Unmap())
		}
		for _, nh := range r.MultiPath {
			if a, ok := netip.AddrFromSlice(nh.Gw); ok {
				t.Via = append(t.Via, a.Unmap())
			}
		}
		sort.Slice(t.Via, func(i, j int) bool { return t.Via[i].Less(t.Via[j]) })
	}
	t.Metric = r.Priority
	return t
}

// listRoutes dumps routes, retrying an interrupted dump.
func listRoutes(h nlOps, fam int) ([]netlink.Route, error) {
	var err error
	for i := 0; i < 5; i++ {
		var rs []netlink.Route
		rs, err = h.RouteListFiltered(fam, &netlink.Route{Table: syscall.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		if err == nil || !errors.Is(err, netlink.ErrDumpInterrupted) {
			return rs, err
		}
	}
	return nil, fmt.Errorf("route dump: %w", err)
}

func toPrefix(n *net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}

func sameTarget(a, b RouteTarget) bool { return a.String() == b.String() }

// Apply reconciles: adds and replaces first, deletes after, all errors
// joined; failures leave the manager dirty for the next apply. A dirty
// manager reads the whole table back; otherwise only the interfaces whose
// routes changed are (routes_incr.go).
func (m *routeManager) Apply() error {
	if !m.dirty && len(m.touched) == 0 && len(m.strangers) == 0 {
		return nil
	}
	if err := m.nl.ready(); err != nil {
		return err
	}
	var kernel map[netip.Prefix]kernelRoute
	var keys []netip.Prefix
	var err error
	if m.dirty {
		kernel, err = m.readKernel()
		for p := range m.desired {
			keys = append(keys, p)
		}
	} else {
		kernel, keys, err = m.readTouched()
	}
	if err != nil {
		m.dirty = true // read it all back next time
		return err
	}
	errs := m.reconcile(kernel, keys)
	if m.dirty {
		m.forget(kernel, nil)
	} else {
		m.forget(kernel, m.touched)
	}
	clear(m.touched)
	m.dirty = len(errs) > 0
	return errors.Join(errs...)
}

// reconcile makes the routes of keys (desired prefixes) what they should
// be, then removes the routes read back (kernel) that are not desired.
func (m *routeManager) reconcile(kernel map[netip.Prefix]kernelRoute, keys []netip.Prefix) []error {
	var errs []error
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, p := range keys {
		want := m.desired[p]
		have, exists := kernel[p]
		if exists && sameTarget(have.target, want) && have.proto == want.protocol() && have.target.Metric == kernelMetric(p, want.Metric) {
			continue
		}
		if m.sync.frozen(want.protocol(), want.Blackhole) || exists && m.sync.frozen(have.proto, have.target.Blackhole) {
			continue
		}
		if exists && !m.ours(have.proto, have.target.Iface, p) && !m.prefixes.Match(have.target.Iface) {
			errs = append(errs, fmt.Errorf("route %s: a foreign route exists (%s); not replacing it", p, have.target))
			continue
		}
		if err := m.reprogram(p, want, have, exists); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, m.dropExtras()...)
	now := m.now()
	for p, have := range kernel {
		if _, want := m.desired[p]; want || !m.inSync || m.sync.frozen(have.proto, have.target.Blackhole) {
			delete(m.strangers, p)
			continue
		}
		ours := m.ours(have.proto, have.target.Iface, p)
		if !ours && m.keepForeign {
			delete(m.strangers, p)
			continue
		}
		// A foreign route on a cali* interface, or a workload route to a
		// cali* interface no desired route has named yet (m.known): wait
		// out the grace period.
		if !ours || (m.prefixes.Match(have.target.Iface) && !m.known[have.target.Iface]) {
			first, seen := m.strangers[p]
			if !seen {
				m.strangers[p] = stranger{since: now, iface: have.target.Iface}
				continue
			}
			if now.Sub(first.since) < m.grace {
				continue
			}
		}
		if err := m.nl.h.RouteDel(&have.route); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("deleting route %s: %w", p, err))
		}
		delete(m.strangers, p)
	}
	return errs
}

// forget drops the known interfaces that neither a desired nor a kernel
// route names any more (their pods are gone; a name reused later is a new
// pod's), and the strangers whose routes went. Only the interfaces in
// read are looked at (nil: all, the whole table was read).
func (m *routeManager) forget(kernel map[netip.Prefix]kernelRoute, read map[string]bool) {
	in := map[string]bool{}
	for _, r := range kernel {
		in[r.target.Iface] = true
	}
	for _, t := range m.desired {
		in[t.Iface] = true
	}
	for name := range m.known {
		if !in[name] && (read == nil || read[name]) {
			delete(m.known, name)
		}
	}
	for p, st := range m.strangers {
		if _, there := kernel[p]; !there && (read == nil || read[st.iface]) {
			delete(m.strangers, p)
		}
	}
}

func (m *routeManager) program(p netip.Prefix, t RouteTarget, replace bool) error {
	r := &netlink.Route{Dst: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}, Table: syscall.RT_TABLE_MAIN}
	switch {
	case t.Blackhole:
		r.Type = syscall.RTN_BLACKHOLE
	case t.OnLink && t.Iface != "" && len(t.Via) == 1:
		l, err := m.nl.link(t.Iface)
		if err != nil {
			return fmt.Errorf("route %s: interface %s: %w", p, t.Iface, err)
		}
		r.LinkIndex, r.Gw, r.Flags = l.Attrs().Index, t.Via[0].AsSlice(), int(netlink.FLAG_ONLINK)
	case t.Iface != "":
		l, err := m.nl.link(t.Iface)
		if err != nil {
			return fmt.Errorf("route %s: interface %s: %w", p, t.Iface, err)
		}
		r.LinkIndex, r.Scope = l.Attrs().Index, netlink.SCOPE_LINK
		if t.Src.IsValid() {
			r.Src = t.Src.AsSlice()
		}
	default:
		if len(t.Via) == 1 {
			r.Gw = t.Via[0].AsSlice()
		} else {
			for _, v := range t.Via {
				r.MultiPath = append(r.MultiPath, &netlink.NexthopInfo{Gw: v.AsSlice()})
			}
		}
	}
	r.Protocol = netlink.RouteProtocol(t.protocol())
	r.Priority = t.Metric
	var err error
	if replace {
		err = m.nl.h.RouteReplace(r)
	} else {
		err = m.nl.h.RouteAdd(r)
	}
	if err != nil {
		return fmt.Errorf("programming route %s %s: %w", p, t, err)
	}
	return nil
}

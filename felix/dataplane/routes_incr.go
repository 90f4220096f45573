package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
)

// Incremental route apply. A pod's coming or going changes the routes to
// its own interface only, so between full read-backs (start-up, the
// periodic resync, a failure or a setting change: routeManager.dirty) the
// manager reads back only the interfaces whose device routes changed
// (touched), through a dump the kernel filters to that interface, and
// reconciles only the desired routes to them. Any other change (a
// blackhole, a route via a gateway or over a tunnel) reads the whole table
// back as before. Drift on other interfaces, made by others, is repaired
// by the periodic resync.

// stranger is a foreign route on a workload interface, or one of ours to
// an interface not desired yet: first seen at since, on iface.
type stranger struct {
	since time.Time
	iface string
}

// deviceRoute says whether t is a route to a local interface only
// (dev <iface>, no gateway): its routes are read back per interface.
func deviceRoute(t RouteTarget) bool {
	return t.Iface != "" && !t.Blackhole && !t.OnLink && len(t.Via) == 0
}

// sameRoute says whether a and b program the same route.
func sameRoute(a, b RouteTarget) bool {
	return a.Iface == b.Iface && a.Blackhole == b.Blackhole && a.OnLink == b.OnLink && a.Src == b.Src &&
		a.Metric == b.Metric && a.protocol() == b.protocol() && slices.Equal(a.Via, b.Via)
}

// noteChanges compares d with the desired routes and records what
// differs: the interfaces of changed device routes in touched, any other
// change as dirty. It reports whether anything differs.
func (m *routeManager) noteChanges(d map[netip.Prefix]RouteTarget) bool {
	changed := false
	note := func(ts ...RouteTarget) {
		changed = true
		for _, t := range ts {
			if !deviceRoute(t) {
				m.dirty = true
				return
			}
			m.touched[t.Iface] = true
		}
	}
	for p, t := range d {
		old, ok := m.desired[p]
		switch {
		case !ok:
			note(t)
		case !sameRoute(old, t):
			note(old, t)
		}
	}
	for p, old := range m.desired {
		if _, ok := d[p]; !ok {
			note(old)
		}
	}
	return changed
}

// readTouched reads back the routes on the touched interfaces and on those
// strangers were seen on, and returns them with the desired prefixes whose
// routes go to those interfaces. A missing interface has no routes.
func (m *routeManager) readTouched() (map[netip.Prefix]kernelRoute, []netip.Prefix, error) {
	for _, st := range m.strangers {
		m.touched[st.iface] = true
	}
	out := map[netip.Prefix]kernelRoute{}
	m.extras = m.extras[:0]
	names := map[int]string{}
	for name := range m.touched {
		l, err := m.nl.link(name)
		if err != nil {
			var nf netlink.LinkNotFoundError
			if errors.As(err, &nf) {
				continue // gone, and its routes with it
			}
			return nil, nil, fmt.Errorf("interface %s: %w", name, err)
		}
		names[l.Attrs().Index] = name
		for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			rs, err := m.nl.routesOn(fam, l.Attrs().Index)
			if err != nil {
				return nil, nil, fmt.Errorf("routes of %s: %w", name, err)
			}
			m.collect(out, rs, names)
		}
	}
	var keys []netip.Prefix
	for p, t := range m.desired {
		if deviceRoute(t) && m.touched[t.Iface] {
			keys = append(keys, p)
		}
	}
	return out, keys, nil
}

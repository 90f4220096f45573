package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"syscall"

	"github.com/vishvananda/netlink"
)

// LocalEndpoint is a local workload interface as the dataplane needs it.
type LocalEndpoint struct {
	Iface string
	Addrs []netip.Addr
	MAC   string // the pod side's MAC: target of the permanent neighbour entries
	// Shaping and EgressShaping are the bandwidth limits to and from the
	// workload (qos.go, qos_egress.go); nil: none.
	Shaping, EgressShaping *TokenBucket
}

// endpointManager keeps, per workload interface, the host-side sysctls and
// a permanent neighbour entry for each pod address.
type endpointManager struct {
	desired map[string]LocalEndpoint
	pending map[string]bool // interfaces to (re)program
	gone    map[string]bool // interfaces no longer desired: their permanent neighbours go
	scanAll bool            // on resync: look for such interfaces among all workload links
	// verify holds the endpoints to read back in full (all at start-up
	// and on the periodic resync); for the others the record (done)
	// stands in for the kernel's state (endpoints_record.go).
	verify  map[string]bool
	started bool
	done    map[string]epRecord
	// table is the neighbour table read back in this apply, by interface
	// index (nil: not read).
	table   map[int][]netlink.Neigh
	inSync  bool // nothing is removed before the datastore view is in sync
	dirty   bool
	procSys string // "/proc/sys"

	// prefixes name the workload interfaces (interfacePrefix).
	prefixes IfacePrefixes
	nl       *nlHandle // the dataplane's netlink handle (nlhandle.go)
}

func newEndpointManager() *endpointManager {
	return &endpointManager{desired: map[string]LocalEndpoint{}, pending: map[string]bool{}, gone: map[string]bool{}, procSys: "/proc/sys", dirty: true,
		verify: map[string]bool{}, done: map[string]epRecord{},
		prefixes: DefaultIfacePrefixes, nl: newNLHandle()}
}

// SetDesired records the full set of local endpoints and marks the ones
// that changed (no kernel I/O).
func (m *endpointManager) SetDesired(eps []LocalEndpoint, inSync bool) {
	d := make(map[string]LocalEndpoint, len(eps))
	for _, e := range eps {
		d[e.Iface] = e
		if old, ok := m.desired[e.Iface]; !ok || !sameEndpoint(old, e) {
			m.pending[e.Iface] = true
		}
	}
	for name := range m.pending {
		if _, ok := d[name]; !ok {
			delete(m.pending, name)
		}
	}
	for name := range m.desired {
		if _, ok := d[name]; !ok {
			m.gone[name] = true
		}
	}
	for name := range d {
		delete(m.gone, name)
	}
	m.desired, m.inSync = d, inSync
	m.dirty = m.dirty || len(m.pending) > 0 || len(m.gone) > 0
}

// resyncAll marks every endpoint for reprogramming, read back in full
// (periodic resync).
func (m *endpointManager) resyncAll() {
	for name := range m.desired {
		m.pending[name], m.verify[name] = true, true
	}
	m.scanAll, m.dirty = true, true
}

func sameEndpoint(a, b LocalEndpoint) bool {
	if a.MAC != b.MAC || len(a.Addrs) != len(b.Addrs) {
		return false
	}
	for i := range a.Addrs {
		if a.Addrs[i] != b.Addrs[i] {
			return false
		}
	}
	return true
}

func (m *endpointManager) sysctl(path, want string) error { return setSysctl(m.procSys, path, want) }

// Apply programs what is missing; interfaces that do not exist yet are
// skipped (the CNI plugin may still be creating them) and retried.
func (m *endpointManager) Apply() error {
	if !m.dirty {
		return nil
	}
	if err := m.nl.ready(); err != nil {
		return err
	}
	defer func() { m.table = nil }()
	var errs []error
	names := make([]string, 0, len(m.pending))
	for n := range m.pending {
		names = append(names, n)
		if !m.started {
			m.verify[n] = true // what was there before this process
		}
	}
	m.started = true
	sort.Strings(names)
	if err := m.nl.linksFor(len(names)); err != nil {
		return err
	}
	for _, name := range names {
		ep := m.desired[name]
		link, err := m.nl.link(name)
		if err != nil {
			continue // not there yet: stays pending
		}
		if err := m.program(link, ep); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(m.pending, name)
	}
	if m.inSync {
		errs = append(errs, m.pruneGone())
	}
	m.dirty = len(m.pending) > 0 || len(m.gone) > 0
	return errors.Join(errs...)
}

// pruneGone removes the permanent neighbours of interfaces that are no
// longer endpoints (the interface may outlive its endpoint), and on a
// resync those of any cali* interface that is not one.
func (m *endpointManager) pruneGone() error {
	full := m.scanAll
	if m.scanAll {
		links, err := m.nl.linkDump()
		if err != nil {
			return err
		}
		for name := range links {
			if _, ok := m.desired[name]; !ok && m.prefixes.Match(name) {
				m.gone[name] = true
			}
		}
		m.scanAll = false
	}
	var errs []error
	for name := range m.gone {
		link, err := m.nl.link(name)
		switch {
		case err != nil:
			err = nil // the interface went, and its neighbours with it
		case full:
			err = m.pruneNeighbours(link, nil)
		default:
			err = m.dropRecorded(link, nil)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		delete(m.gone, name)
		delete(m.done, name)
		delete(m.verify, name)
	}
	return errors.Join(errs...)
}

// neighboursOf is link's neighbour entries as read back in this apply: the
// node's whole table is listed once per apply that reads any back (start-up,
// resync), not once per interface.
func (m *endpointManager) neighboursOf(link netlink.Link) ([]netlink.Neigh, error) {
	if m.table == nil {
		all, err := m.nl.h.NeighList(0, netlink.FAMILY_ALL)
		if err != nil {
			return nil, fmt.Errorf("listing neighbours: %w", err)
		}
		m.table = map[int][]netlink.Neigh{}
		for _, n := range all {
			m.table[n.LinkIndex] = append(m.table[n.LinkIndex], n)
		}
	}
	return m.table[link.Attrs().Index], nil
}

// pruneNeighbours deletes the permanent neighbours on link whose address
// is not in keep.
func (m *endpointManager) pruneNeighbours(link netlink.Link, keep []netip.Addr) error {
	have, err := m.neighboursOf(link)
	if err != nil {
		return err
	}
	h := m.nl.h
	var errs []error
	for _, n := range have {
		a, ok := netip.AddrFromSlice(n.IP)
		if !ok || n.State&netlink.NUD_PERMANENT == 0 || slices.Contains(keep, a.Unmap()) {
			continue
		}
		if err := h.NeighDel(&n); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("deleting neighbour %s on %s: %w", a, link.Attrs().Name, err))
		}
	}
	return errors.Join(errs...)
}

// neighbours sets a permanent entry for each pod address on its interface.
func (m *endpointManager) neighbours(link netlink.Link, ep LocalEndpoint) error {
	mac, err := net.ParseMAC(ep.MAC)
	if err != nil || ep.MAC == "" {
		if !m.inSync {
			return nil
		}
		return m.pruneNeighbours(link, nil) // no MAC known: leave ARP to the kernel
	}
	have, err := m.neighboursOf(link)
	if err != nil {
		return err
	}
	var errs []error
	for _, a := range ep.Addrs {
		ok := false
		for _, n := range have {
			if n.IP.Equal(a.AsSlice()) && n.State == netlink.NUD_PERMANENT && n.HardwareAddr.String() == mac.String() {
				ok = true
			}
		}
		if ok {
			continue
		}
		fam := netlink.FAMILY_V4
		if a.Is6() {
			fam = netlink.FAMILY_V6
		}
		n := &netlink.Neigh{LinkIndex: link.Attrs().Index, Family: fam, State: netlink.NUD_PERMANENT, IP: a.AsSlice(), HardwareAddr: mac}
		if err := m.nl.h.NeighSet(n); err != nil {
			errs = append(errs, fmt.Errorf("neighbour %s on %s: %w", a, ep.Iface, err))
		}
	}
	if m.inSync { // addresses the endpoint no longer has
		errs = append(errs, m.pruneNeighbours(link, ep.Addrs))
	}
	return errors.Join(errs...)
}

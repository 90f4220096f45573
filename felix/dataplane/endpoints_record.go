package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/cni"
)

// The endpoint manager's record of what it programmed on each workload
// interface. An endpoint is read back in full (sysctls read, neighbours
// listed) at start-up and on the periodic resync; a new or changed one
// otherwise costs only its own interface: its sysctls are checked once
// for the interface (the CNI plugin has usually written them), its
// neighbour entries are set and the ones recorded that it no longer has
// deleted, without listing the node's neighbour table.

// epRecord is what was programmed on one interface.
type epRecord struct {
	index   int    // the interface's index: a new interface under the same name starts empty
	sysctls bool   // its host-side sysctls were checked
	mac     string // the MAC of its permanent neighbours ("" none)
	addrs   []netip.Addr
}

// program makes link's sysctls and permanent neighbours what ep needs, in
// full when the endpoint is to be verified, else from the record.
func (m *endpointManager) program(link netlink.Link, ep LocalEndpoint) error {
	name, index := ep.Iface, link.Attrs().Index
	rec, ok := m.done[name]
	if !ok || rec.index != index {
		rec = epRecord{index: index}
	}
	full := m.verify[name]
	var errs []error
	if full || !rec.sysctls {
		for _, s := range cni.HostVethSysctls(name, false) {
			if err := m.sysctl(s[0], s[1]); err != nil {
				errs = append(errs, err)
			}
		}
		rec.sysctls = len(errs) == 0
	}
	var err error
	if full {
		err = m.neighbours(link, ep)
	} else {
		err = m.setNeighbours(link, ep)
	}
	if err = errors.Join(append(errs, err)...); err != nil {
		m.verify[name] = true // the record may be wrong now
		return err
	}
	rec.mac, rec.addrs = "", nil
	if mac, err := net.ParseMAC(ep.MAC); err == nil {
		rec.mac, rec.addrs = mac.String(), slices.Clone(ep.Addrs)
	}
	m.done[name] = rec
	delete(m.verify, name)
	return nil
}

// setNeighbours sets the permanent neighbours of ep the record does not
// have and deletes the recorded ones it no longer has.
func (m *endpointManager) setNeighbours(link netlink.Link, ep LocalEndpoint) error {
	mac, err := net.ParseMAC(ep.MAC)
	if err != nil || ep.MAC == "" {
		if !m.inSync {
			return nil
		}
		return m.dropRecorded(link, nil) // no MAC known: leave ARP to the kernel
	}
	rec := m.done[ep.Iface]
	same := rec.index == link.Attrs().Index && rec.mac == mac.String()
	var errs []error
	for _, a := range ep.Addrs {
		if same && slices.Contains(rec.addrs, a) {
			continue
		}
		n := &netlink.Neigh{LinkIndex: link.Attrs().Index, Family: family(a), State: netlink.NUD_PERMANENT, IP: a.AsSlice(), HardwareAddr: mac}
		if err := m.nl.h.NeighSet(n); err != nil {
			errs = append(errs, fmt.Errorf("neighbour %s on %s: %w", a, ep.Iface, err))
		}
	}
	if m.inSync { // addresses the endpoint no longer has
		errs = append(errs, m.dropRecorded(link, ep.Addrs))
	}
	return errors.Join(errs...)
}

// dropRecorded deletes the permanent neighbours recorded on link whose
// address is not in keep.
func (m *endpointManager) dropRecorded(link netlink.Link, keep []netip.Addr) error {
	rec, ok := m.done[link.Attrs().Name]
	if !ok || rec.index != link.Attrs().Index {
		return nil
	}
	var errs []error
	for _, a := range rec.addrs {
		if slices.Contains(keep, a) {
			continue
		}
		n := &netlink.Neigh{LinkIndex: rec.index, Family: family(a), IP: a.AsSlice()}
		if err := m.nl.h.NeighDel(n); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("deleting neighbour %s on %s: %w", a, link.Attrs().Name, err))
		}
	}
	return errors.Join(errs...)
}

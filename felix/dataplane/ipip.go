package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
)

// IPIPDevice is the desired IP-in-IP interface (tunl0, the kernel's
// fallback tunnel: any local, any remote). Routes to remote blocks go over
// it (RouteTarget OnLink via the remote node's address).
type IPIPDevice struct {
	Name   string
	MTU    int        // 0: the parent interface's MTU minus 20
	Addr   netip.Addr // the node's IPIP tunnel address (/32); invalid: none
	Parent netip.Addr // the node's address (its interface gives the MTU)
}

// ipipOverhead is what IP-in-IP adds to a packet.
const ipipOverhead = 20

// ipipManager keeps tunl0 equal to the desired device.
type ipipManager struct {
	desired *IPIPDevice
	inSync  bool
	dirty   bool
	name    string // the device managed (its address removed when none is desired)
	nl      *nlHandle
}

func newIPIPManager(name string) *ipipManager {
	return &ipipManager{dirty: true, name: name, nl: newNLHandle()}
}

// SetDesired records the desired device (no kernel I/O); nil strips it
// once the datastore view is in sync.
func (m *ipipManager) SetDesired(d *IPIPDevice, inSync bool) {
	if !m.dirty && inSync == m.inSync && d.String() == m.desired.String() {
		return
	}
	m.desired, m.inSync, m.dirty = d, inSync, true
}

// String renders the device for logs and comparisons ("" for none).
func (d *IPIPDevice) String() string {
	if d == nil {
		return ""
	}
	return fmt.Sprintf("%+v", *d)
}

// Apply reconciles the device, its MTU, state and address.
func (m *ipipManager) Apply() error {
	if !m.dirty {
		return nil
	}
	err := m.apply()
	m.dirty = err != nil
	return err
}

func (m *ipipManager) apply() error {
	if err := m.nl.ready(); err != nil {
		return err
	}
	dev := m.desired
	if dev == nil {
		if !m.inSync {
			return nil
		}
		return m.remove()
	}
	l, err := m.ensureLink(dev)
	if err != nil {
		return err
	}
	return m.ensureAddr(l, dev)
}

// remove takes the addresses off the device, as Calico's Felix does when
// IP-in-IP is off: tunl0 is the kernel's fallback tunnel, which exists as
// long as the ipip module is loaded and cannot be deleted.
func (m *ipipManager) remove() error {
	l, err := m.nl.h.LinkByName(m.name)
	if err != nil {
		return nil // no tunl0: nothing to clean
	}
	addrs, err := m.nl.h.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("%s: listing addresses: %w", m.name, err)
	}
	var errs []error
	for _, a := range addrs {
		if err := m.nl.h.AddrDel(l, &a); err != nil && !errors.Is(err, syscall.EADDRNOTAVAIL) {
			errs = append(errs, fmt.Errorf("%s: removing address %s: %w", m.name, a.IPNet, err))
		}
	}
	return errors.Join(errs...)
}

// ensureLink creates the device if missing (loading the ipip module makes
// the kernel create tunl0 itself, so "exists" is fine) and sets its MTU
// and state.
func (m *ipipManager) ensureLink(dev *IPIPDevice) (netlink.Link, error) {
	l, err := m.nl.h.LinkByName(dev.Name)
	if err != nil {
		err := m.nl.h.LinkAdd(&netlink.Iptun{LinkAttrs: netlink.LinkAttrs{Name: dev.Name}})
		if err != nil && !errors.Is(err, syscall.EEXIST) {
			return nil, fmt.Errorf("creating %s (ipip): %w", dev.Name, err)
		}
		if l, err = m.nl.h.LinkByName(dev.Name); err != nil {
			return nil, fmt.Errorf("reading back %s: %w", dev.Name, err)
		}
	}
	if l.Type() != "ipip" {
		return nil, fmt.Errorf("%s exists with link type %q, not ipip", dev.Name, l.Type())
	}
	mtu := dev.MTU
	if mtu == 0 {
		mtu = 1500 - ipipOverhead
		if p := parentLink(m.nl.h, dev.Parent); dev.Parent.IsValid() && p != nil {
			mtu = p.Attrs().MTU - ipipOverhead
		}
	}
	return l, errors.Join(ensureMTUUp(m.nl.h, l, dev.Name, mtu)...)
}

// ensureAddr leaves exactly the tunnel address (/32) on the device, or
// none when the node has no tunnel address yet.
func (m *ipipManager) ensureAddr(l netlink.Link, dev *IPIPDevice) error {
	return ensureOnlyAddr(m.nl.h, l, dev.Name, netlink.FAMILY_V4, dev.Addr)
}

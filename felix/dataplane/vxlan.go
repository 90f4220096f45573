package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// VXLANDevice is the desired VXLAN interface. Routes to remote blocks go
// over it (RouteTarget OnLink); this manager keeps the device, its
// address and the per-peer neighbour and FDB entries.
type VXLANDevice struct {
	Name      string
	VNI, Port int
	MTU       int // 0: the parent interface's MTU minus 50
	Addr      netip.Addr
	MAC       string
	Parent    netip.Addr // the node address the UDP packets leave from
}

// VXLANPeer is a remote VTEP: a permanent neighbour Addr -> MAC and an
// FDB entry MAC -> NodeIP on the device.
type VXLANPeer struct {
	Addr   netip.Addr
	MAC    string
	NodeIP netip.Addr
}

// VXLAN is the desired overlay state. A nil Device removes the device
// (once the datastore view is in sync).
type VXLAN struct {
	Device *VXLANDevice
	Peers  []VXLANPeer
}

// vxlanOverhead is what VXLAN adds to a packet, over IPv4 and over IPv6.
const (
	vxlanOverhead   = 50
	vxlanOverheadV6 = 70
)

// vxlanManager keeps the VXLAN device equal to the desired one.
type vxlanManager struct {
	desired VXLAN
	inSync  bool
	dirty   bool
	name    string // the device last desired (removed when none is)
	nl      *nlHandle
}

// newVXLANManager manages the device name (vxlan.calico, vxlan-v6.calico).
func newVXLANManager(name string) *vxlanManager {
	return &vxlanManager{dirty: true, name: name, nl: newNLHandle()}
}

// SetDesired records the desired state (no kernel I/O).
func (m *vxlanManager) SetDesired(d VXLAN, inSync bool) {
	sort.Slice(d.Peers, func(i, j int) bool { return d.Peers[i].Addr.Less(d.Peers[j].Addr) })
	if !m.dirty && inSync == m.inSync && fmt.Sprint(d.Device, d.Peers) == fmt.Sprint(m.desired.Device, m.desired.Peers) {
		return
	}
	m.desired, m.inSync, m.dirty = d, inSync, true
}

// Apply reconciles the device, its address, neighbours and FDB entries.
func (m *vxlanManager) Apply() error {
	if !m.dirty {
		return nil
	}
	err := m.apply()
	m.dirty = err != nil
	return err
}

func (m *vxlanManager) apply() error {
	if err := m.nl.ready(); err != nil {
		return err
	}
	dev := m.desired.Device
	if dev == nil {
		if !m.inSync {
			return nil
		}
		l, err := m.nl.h.LinkByName(m.name)
		if err != nil {
			return nil // gone already
		}
		if err := m.nl.h.LinkDel(l); err != nil {
			return fmt.Errorf("deleting %s: %w", m.name, err)
		}
		return nil
	}
	l, err := m.ensureLink(dev)
	if err != nil {
		return err
	}
	return errors.Join(m.ensureAddr(l, dev), m.ensurePeers(l, dev))
}

// family is the netlink family of addr.
func family(addr netip.Addr) int {
	if addr.Is6() {
		return netlink.FAMILY_V6
	}
	return netlink.FAMILY_V4
}

// parentLink is the interface holding addr (nil when none does).
func parentLink(h nlOps, addr netip.Addr) netlink.Link {
	addrs, err := h.AddrList(nil, family(addr))
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap() == addr {
			if l, err := h.LinkByIndex(a.LinkIndex); err == nil {
				return l
			}
		}
	}
	return nil
}

// ensureLink creates or fixes the device: VNI, port and source need a new
// device; MAC and MTU are set in place.
func (m *vxlanManager) ensureLink(dev *VXLANDevice) (netlink.Link, error) {
	mac, err := net.ParseMAC(dev.MAC)
	if err != nil {
		return nil, fmt.Errorf("%s: MAC %q: %w", dev.Name, dev.MAC, err)
	}
	parent := parentLink(m.nl.h, dev.Parent)
	overhead := vxlanOverhead
	if dev.Parent.Is6() {
		overhead = vxlanOverheadV6
	}
	mtu := dev.MTU
	if mtu == 0 {
		mtu = 1500 - overhead
		if parent != nil {
			mtu = parent.Attrs().MTU - overhead
		}
	}
	want := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: dev.Name, HardwareAddr: mac, MTU: mtu},
		VxlanId: dev.VNI, Port: dev.Port, SrcAddr: dev.Parent.AsSlice(), Learning: false}
	if parent != nil {
		want.VtepDevIndex = parent.Attrs().Index
	}
	l, err := m.nl.h.LinkByName(dev.Name)
	if err == nil {
		have, ok := l.(*netlink.Vxlan)
		if !ok || have.VxlanId != want.VxlanId || have.Port != want.Port || !have.SrcAddr.Equal(want.SrcAddr) ||
			have.Learning || (parent != nil && have.VtepDevIndex != want.VtepDevIndex) {
			if err := m.nl.h.LinkDel(l); err != nil {
				return nil, fmt.Errorf("replacing %s: %w", dev.Name, err)
			}
			l = nil
		}
	} else {
		l = nil
	}
	if l == nil {
		if err := m.nl.h.LinkAdd(want); err != nil {
			return nil, fmt.Errorf("creating %s (VNI %d, port %d): %w", dev.Name, dev.VNI, dev.Port, err)
		}
		if l, err = m.nl.h.LinkByName(dev.Name); err != nil {
			return nil, fmt.Errorf("reading back %s: %w", dev.Name, err)
		}
	}
	var errs []error
	if l.Attrs().HardwareAddr.String() != mac.String() {
		if err := m.nl.h.LinkSetHardwareAddr(l, mac); err != nil {
			errs = append(errs, fmt.Errorf("%s: setting MAC %s: %w", dev.Name, mac, err))
		}
	}
	errs = append(errs, ensureMTUUp(m.nl.h, l, dev.Name, mtu)...)
	return l, errors.Join(errs...)
}

// ensureAddr leaves exactly the tunnel address (/32, /128) on the device
// (and the kernel's IPv6 link-local address).
func (m *vxlanManager) ensureAddr(l netlink.Link, dev *VXLANDevice) error {
	return ensureOnlyAddr(m.nl.h, l, dev.Name, family(dev.Addr), dev.Addr)
}

// ensurePeers keeps one permanent neighbour and one FDB entry per peer and
// removes the others.
func (m *vxlanManager) ensurePeers(l netlink.Link, dev *VXLANDevice) error {
	idx := l.Attrs().Index
	wantNeigh := map[netip.Addr]string{}
	wantFDB := map[string]netip.Addr{}
	for _, p := range m.desired.Peers {
		mac, err := net.ParseMAC(p.MAC)
		if err != nil {
			continue
		}
		wantNeigh[p.Addr] = mac.String()
		wantFDB[mac.String()] = p.NodeIP
	}
	var errs []error
	neighs, err := m.nl.h.NeighList(idx, family(dev.Addr))
	if err != nil {
		return fmt.Errorf("%s: listing neighbours: %w", dev.Name, err)
	}
	haveNeigh := map[netip.Addr]bool{}
	for _, n := range neighs {
		ip, _ := netip.AddrFromSlice(n.IP)
		ip = ip.Unmap()
		if mac, ok := wantNeigh[ip]; ok && n.HardwareAddr.String() == mac && n.State&netlink.NUD_PERMANENT != 0 {
			haveNeigh[ip] = true
			continue
		}
		if _, ok := wantNeigh[ip]; !ok && n.State&netlink.NUD_PERMANENT != 0 {
			if err := m.nl.h.NeighDel(&n); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("%s: removing neighbour %s: %w", dev.Name, ip, err))
			}
		}
	}
	fdbs, err := m.nl.h.NeighList(idx, unix.AF_BRIDGE)
	if err != nil {
		return fmt.Errorf("%s: listing FDB: %w", dev.Name, err)
	}
	haveFDB := map[string]bool{}
	for _, n := range fdbs {
		mac := n.HardwareAddr.String()
		ip, _ := netip.AddrFromSlice(n.IP)
		if want, ok := wantFDB[mac]; ok && ip.Unmap() == want {
			haveFDB[mac] = true
			continue
		}
		if err := m.nl.h.NeighDel(&n); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("%s: removing FDB entry %s: %w", dev.Name, mac, err))
		}
	}
	for _, ip := range sortedAddrs(wantNeigh) {
		if haveNeigh[ip] {
			continue
		}
		mac, _ := net.ParseMAC(wantNeigh[ip])
		n := &netlink.Neigh{LinkIndex: idx, Family: family(ip), State: netlink.NUD_PERMANENT, IP: ip.AsSlice(), HardwareAddr: mac}
		if err := m.nl.h.NeighSet(n); err != nil {
			errs = append(errs, fmt.Errorf("%s: neighbour %s -> %s: %w", dev.Name, ip, mac, err))
		}
	}
	macs := make([]string, 0, len(wantFDB))
	for mac := range wantFDB {
		macs = append(macs, mac)
	}
	slices.Sort(macs)
	for _, s := range macs {
		if haveFDB[s] {
			continue
		}
		mac, _ := net.ParseMAC(s)
		n := &netlink.Neigh{LinkIndex: idx, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF, State: netlink.NUD_PERMANENT,
			IP: wantFDB[s].AsSlice(), HardwareAddr: mac}
		if err := m.nl.h.NeighSet(n); err != nil {
			errs = append(errs, fmt.Errorf("%s: FDB %s -> %s: %w", dev.Name, mac, wantFDB[s], err))
		}
	}
	return errors.Join(errs...)
}

func sortedAddrs[V any](m map[netip.Addr]V) []netip.Addr {
	out := make([]netip.Addr, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

// String renders the state for logs and tests.
func (v VXLAN) String() string {
	var b strings.Builder
	if v.Device != nil {
		fmt.Fprintf(&b, "%+v", *v.Device)
	}
	for _, p := range v.Peers {
		fmt.Fprintf(&b, " %s=%s@%s", p.Addr, p.MAC, p.NodeIP)
	}
	return b.String()
}

package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Shared by the tunnel devices (vxlan.go, ipip.go); h is the dataplane's
// netlink handle (nlhandle.go).

// ensureMTUUp gives the tunnel device l (named name) its MTU and sets it up.
func ensureMTUUp(h nlOps, l netlink.Link, name string, mtu int) []error {
	var errs []error
	if l.Attrs().MTU != mtu {
		if err := h.LinkSetMTU(l, mtu); err != nil {
			errs = append(errs, fmt.Errorf("%s: setting MTU %d: %w", name, mtu, err))
		}
	}
	if l.Attrs().Flags&net.FlagUp == 0 {
		if err := h.LinkSetUp(l); err != nil {
			errs = append(errs, fmt.Errorf("%s: setting up: %w", name, err))
		}
	}
	return errs
}

// ensureOnlyAddr leaves exactly want, as a host prefix (/32, /128), among
// the addresses of family fam on the tunnel device l (and the kernel's IPv6
// link-local address); an invalid want removes them all.
func ensureOnlyAddr(h nlOps, l netlink.Link, name string, fam int, want netip.Addr) error {
	addrs, err := h.AddrList(l, fam)
	if err != nil {
		return fmt.Errorf("%s: listing addresses: %w", name, err)
	}
	var errs []error
	found := false
	for _, a := range addrs {
		ip, _ := netip.AddrFromSlice(a.IP)
		ip = ip.Unmap()
		ones, _ := a.Mask.Size()
		if want.IsValid() && ip == want && ones == want.BitLen() {
			found = true
			continue
		}
		if ip.Is6() && ip.IsLinkLocalUnicast() {
			continue
		}
		if err := h.AddrDel(l, &a); err != nil {
			errs = append(errs, fmt.Errorf("%s: removing address %s: %w", name, a.IPNet, err))
		}
	}
	if want.IsValid() && !found {
		bits := want.BitLen()
		a := &netlink.Addr{IPNet: &net.IPNet{IP: want.AsSlice(), Mask: net.CIDRMask(bits, bits)}}
		if want.Is6() {
			a.Flags = unix.IFA_F_NODAD
		}
		if err := h.AddrAdd(l, a); err != nil {
			errs = append(errs, fmt.Errorf("%s: adding address %s: %w", name, want, err))
		}
	}
	return errors.Join(errs...)
}

package dataplane

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// HostInterfaces reads the host's interfaces and their addresses, for host
// endpoints given by expectedIPs. Workload interfaces (interfacePrefix)
// are left out. It reads through the dataplane's netlink handle, in the
// calling thread's namespace.
func (d *Dataplane) HostInterfaces(workload IfacePrefixes) (map[string][]netip.Addr, error) {
	if err := d.nl.ready(); err != nil {
		return nil, err
	}
	links, err := d.nl.h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	byIndex := map[int]string{}
	for _, l := range links {
		name := l.Attrs().Name
		if workload.Match(name) {
			continue
		}
		byIndex[l.Attrs().Index] = name
	}
	addrs, err := d.nl.h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("listing addresses: %w", err)
	}
	out := map[string][]netip.Addr{}
	for _, a := range addrs {
		name, ok := byIndex[a.LinkIndex]
		if !ok {
			continue
		}
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out[name] = append(out[name], ip.Unmap())
		}
	}
	return out, nil
}

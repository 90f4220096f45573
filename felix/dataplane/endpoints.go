package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"
)

// LocalEndpoint is a local workload interface as the dataplane needs it.
type LocalEndpoint struct {
	Iface string
	Addrs []netip.Addr
	MAC   string // the pod side's MAC: target of the permanent neighbour entries
}

// endpointManager keeps, per workload interface, the host-side sysctls and
// a permanent neighbour entry for each pod address.
type endpointManager struct {
	desired map[string]LocalEndpoint
	pending map[string]bool // interfaces to (re)program
	dirty   bool
	procSys string // "/proc/sys"
}

func newEndpointManager() *endpointManager {
	return &endpointManager{desired: map[string]LocalEndpoint{}, pending: map[string]bool{}, procSys: "/proc/sys", dirty: true}
}

// SetDesired records the full set of local endpoints and marks the ones
// that changed (no kernel I/O).
func (m *endpointManager) SetDesired(eps []LocalEndpoint) {
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
	m.desired = d
	m.dirty = m.dirty || len(m.pending) > 0
}

// resyncAll marks every endpoint for reprogramming (periodic resync).
func (m *endpointManager) resyncAll() {
	for name := range m.desired {
		m.pending[name] = true
	}
	m.dirty = true
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

func (m *endpointManager) sysctl(path, want string) error {
	full := filepath.Join(m.procSys, path)
	if b, err := os.ReadFile(full); err == nil && strings.TrimSpace(string(b)) == want {
		return nil
	}
	if err := os.WriteFile(full, []byte(want), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", path, want, err)
	}
	return nil
}

// Apply programs what is missing; interfaces that do not exist yet are
// skipped (the CNI plugin may still be creating them) and retried.
func (m *endpointManager) Apply() error {
	if !m.dirty {
		return nil
	}
	var errs []error
	names := make([]string, 0, len(m.pending))
	for n := range m.pending {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		ep := m.desired[name]
		link, err := netlink.LinkByName(name)
		if err != nil {
			continue // not there yet: stays pending
		}
		before := len(errs)
		for _, s := range [][2]string{
			{"net/ipv4/conf/" + name + "/proxy_arp", "1"},
			{"net/ipv4/neigh/" + name + "/proxy_delay", "0"},
			{"net/ipv4/conf/" + name + "/forwarding", "1"},
			{"net/ipv4/conf/" + name + "/route_localnet", "1"},
		} {
			if err := m.sysctl(s[0], s[1]); err != nil {
				errs = append(errs, err)
			}
		}
		if err := m.neighbours(link, ep); err != nil {
			errs = append(errs, err)
		}
		if len(errs) == before {
			delete(m.pending, name)
		}
	}
	m.dirty = len(m.pending) > 0
	return errors.Join(errs...)
}

// neighbours sets a permanent entry for each pod address on its interface.
func (m *endpointManager) neighbours(link netlink.Link, ep LocalEndpoint) error {
	mac, err := net.ParseMAC(ep.MAC)
	if err != nil || ep.MAC == "" {
		return nil // no MAC known: leave ARP to the kernel
	}
	have, err := netlink.NeighList(link.Attrs().Index, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("neighbours of %s: %w", ep.Iface, err)
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
		if err := netlink.NeighSet(n); err != nil {
			errs = append(errs, fmt.Errorf("neighbour %s on %s: %w", a, ep.Iface, err))
		}
	}
	return errors.Join(errs...)
}

package node

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/selector"
)

// The pod MTU, as Felix computes it (docs/BOOTSTRAP.md): the smallest MTU
// of the host interfaces whose names match mtuIfacePattern and that are up
// (1460 when none match), less the encapsulation overhead when a pool this
// node uses encapsulates. Written to <lib-dir>/mtu, where the CNI plugin
// reads it when its netconf has no mtu (cni/mtu.go).
const (
	// fallbackHostMTU is Felix's host MTU when no interface matches: the
	// smallest among common cloud providers.
	fallbackHostMTU = 1460

	ipipOverhead   = 20 // outer IPv4 header
	vxlanOverhead  = 50 // outer IPv4 + UDP + VXLAN + inner Ethernet
	vxlan6Overhead = 70 // outer IPv6 + UDP + VXLAN + inner Ethernet
)

// MTUSettings are the MTU settings: --mtu, and the effective
// mtuIfacePattern, ipipMTU, vxlanMTU and vxlanMTUV6 (felix/config/settings.go: env over
// FelixConfiguration node.<name> over default); zero values are unset.
type MTUSettings struct {
	Override   int    // --mtu / FELIX_MTU: the pod MTU, no detection
	Pattern    string // mtuIfacePattern, FELIX_MTUIFACEPATTERN
	IPIPMTU    int    // ipipMTU, FELIX_IPINIPMTU
	VXLANMTU   int    // vxlanMTU, FELIX_VXLANMTU
	VXLANMTUV6 int    // vxlanMTUV6, FELIX_VXLANMTUV6
}

// MTUFromSpec is the MTU part of an effective configuration.
func MTUFromSpec(override int, s api.FelixConfigurationSpec) MTUSettings {
	m := MTUSettings{Override: override, Pattern: s.MTUIfacePattern}
	for _, f := range []struct {
		dst *int
		v   *int
	}{{&m.IPIPMTU, s.IPIPMTU}, {&m.VXLANMTU, s.VXLANMTU}, {&m.VXLANMTUV6, s.VXLANMTUV6}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	return m
}

// LinkMTU is one host interface as MTU detection sees it.
type LinkMTU struct {
	Name string
	MTU  int
	Up   bool
}

// Encaps says which encapsulations the pools this node uses turn on.
type Encaps struct{ IPIP, VXLAN, VXLANV6 bool }

// MTUInputs is everything the pod MTU depends on.
type MTUInputs struct {
	Links    []LinkMTU
	Pattern  *regexp.Regexp
	Encaps   Encaps
	Settings MTUSettings // with the datastore's values merged in
}

// HostMTU is the smallest MTU of the up links whose names match pattern,
// or fallbackHostMTU when none does.
func HostMTU(links []LinkMTU, pattern *regexp.Regexp) int {
	smallest := 0
	for _, l := range links {
		if !l.Up || l.MTU <= 0 || pattern == nil || !pattern.MatchString(l.Name) {
			continue
		}
		if smallest == 0 || l.MTU < smallest {
			smallest = l.MTU
		}
	}
	if smallest == 0 {
		return fallbackHostMTU
	}
	return smallest
}

// PodMTU is the MTU for pod interfaces: the override when set, else the
// smallest MTU among the encapsulations in use (each its configured value
// or the host MTU less its overhead), else the host MTU.
func PodMTU(in MTUInputs) int {
	s := in.Settings
	if s.Override > 0 {
		return s.Override
	}
	host := HostMTU(in.Links, in.Pattern)
	mtu := 0
	for _, e := range []struct {
		on            bool
		set, overhead int
	}{
		{in.Encaps.IPIP, s.IPIPMTU, ipipOverhead},
		{in.Encaps.VXLAN, s.VXLANMTU, vxlanOverhead},
		{in.Encaps.VXLANV6, s.VXLANMTUV6, vxlan6Overhead},
	} {
		if !e.on {
			continue
		}
		m := e.set
		if m == 0 {
			m = host - e.overhead
		}
		if mtu == 0 || m < mtu {
			mtu = m
		}
	}
	if mtu == 0 {
		return host
	}
	return mtu
}

// PoolEncaps is the encapsulations of the enabled pools whose
// nodeSelector selects a node with these labels.
func PoolEncaps(pools []*api.IPPool, nodeLabels map[string]string) Encaps {
	var e Encaps
	for _, p := range pools {
		if p.Spec.Disabled {
			continue
		}
		sel := p.Spec.NodeSelector
		if sel == "" {
			sel = "all()"
		}
		s, err := selector.Parse(sel)
		if err != nil || !s.Evaluate(nodeLabels) {
			continue
		}
		pfx, err := p.Prefix()
		if err != nil {
			continue
		}
		if pfx.Addr().Is6() {
			e.VXLANV6 = e.VXLANV6 || p.Spec.VXLANMode.Enabled()
			continue
		}
		e.IPIP = e.IPIP || p.Spec.IPIPMode.Enabled()
		e.VXLAN = e.VXLAN || p.Spec.VXLANMode.Enabled()
	}
	return e
}

// HostLinks lists this namespace's interfaces.
func HostLinks() ([]LinkMTU, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing interfaces for MTU detection: %w", err)
	}
	out := make([]LinkMTU, 0, len(links))
	for _, l := range links {
		a := l.Attrs()
		// Up as Felix counts it: operationally up (a link whose state is
		// unknown or down, such as a fresh cloud NIC, is skipped).
		out = append(out, LinkMTU{Name: a.Name, MTU: a.MTU, Up: a.OperState == netlink.OperUp})
	}
	return out, nil
}

// WriteMTUFile replaces <libDir>/mtu atomically.
func WriteMTUFile(libDir string, mtu int) error {
	if err := os.MkdirAll(libDir, 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	tmp := filepath.Join(libDir, ".mtu.tmp")
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(mtu)), 0o644); err != nil {
		return fmt.Errorf("writing mtu: %w", err)
	}
	return os.Rename(tmp, filepath.Join(libDir, "mtu"))
}

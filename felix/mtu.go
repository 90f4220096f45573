package felix

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/selector"
)

// The pod MTU, as Felix computes it (docs/BOOTSTRAP.md): the smallest MTU
// of the host interfaces whose names match mtuIfacePattern and that are up
// (1460 when none match), less the encapsulation overhead when a pool this
// node uses encapsulates. Written to <lib-dir>/mtu, where the CNI plugin
// reads it when its netconf has no mtu (cni/mtu.go).
const (
	// DefaultMTUIfacePattern is Felix's default mtuIfacePattern.
	DefaultMTUIfacePattern = `^((en|wl|ww|sl|ib)[Pcopsvx].*|(eth|wlan|wwan).*)`
	// fallbackHostMTU is Felix's host MTU when no interface matches: the
	// smallest among common cloud providers.
	fallbackHostMTU = 1460

	ipipOverhead   = 20 // outer IPv4 header
	vxlanOverhead  = 50 // outer IPv4 + UDP + VXLAN + inner Ethernet
	vxlan6Overhead = 70 // outer IPv6 + UDP + VXLAN + inner Ethernet

	mtuRecheck = 30 * time.Second // host interfaces are re-read this often, as Felix does
)

// mtuSettings are the MTU settings: --mtu, and the effective
// mtuIfacePattern, ipipMTU, vxlanMTU and vxlanMTUV6 (settings.go: env over
// FelixConfiguration node.<name> over default); zero values are unset.
type mtuSettings struct {
	Override   int    // --mtu / FELIX_MTU: the pod MTU, no detection
	Pattern    string // mtuIfacePattern, FELIX_MTUIFACEPATTERN
	IPIPMTU    int    // ipipMTU, FELIX_IPINIPMTU
	VXLANMTU   int    // vxlanMTU, FELIX_VXLANMTU
	VXLANMTUV6 int    // vxlanMTUV6, FELIX_VXLANMTUV6
}

// mtuFromSpec is the MTU part of an effective configuration.
func mtuFromSpec(override int, s spec) mtuSettings {
	m := mtuSettings{Override: override, Pattern: s.MTUIfacePattern}
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

// parseMTUEnv checks --mtu / FELIX_MTU; the other MTU variables are
// settings (settings.go).
func parseMTUEnv(_ func(string) string, s *mtuSettings) error {
	if s.Override < 0 || s.Override > 65535 || (s.Override > 0 && s.Override < 68) {
		return fmt.Errorf("--mtu/FELIX_MTU=%d: not an MTU (68-65535, or 0 to detect it)", s.Override)
	}
	return nil
}

// linkMTU is one host interface as MTU detection sees it.
type linkMTU struct {
	Name string
	MTU  int
	Up   bool
}

// encaps says which encapsulations the pools this node uses turn on.
type encaps struct{ IPIP, VXLAN, VXLANV6 bool }

// mtuInputs is everything the pod MTU depends on.
type mtuInputs struct {
	Links    []linkMTU
	Pattern  *regexp.Regexp
	Encaps   encaps
	Settings mtuSettings // with the datastore's values merged in
}

// hostMTU is the smallest MTU of the up links whose names match pattern,
// or fallbackHostMTU when none does.
func hostMTU(links []linkMTU, pattern *regexp.Regexp) int {
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

// podMTU is the MTU for pod interfaces: the override when set, else the
// smallest MTU among the encapsulations in use (each its configured value
// or the host MTU less its overhead), else the host MTU.
func podMTU(in mtuInputs) int {
	s := in.Settings
	if s.Override > 0 {
		return s.Override
	}
	host := hostMTU(in.Links, in.Pattern)
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

// poolEncaps is the encapsulations of the enabled pools whose
// nodeSelector selects a node with these labels.
func poolEncaps(pools []*api.IPPool, nodeLabels map[string]string) encaps {
	var e encaps
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

// mtuWatch keeps <lib-dir>/mtu equal to the pod MTU as pools, this node's
// labels, FelixConfiguration and the host interfaces change.
type mtuWatch struct {
	c        *store.Client
	node     string
	libDir   string
	override int  // --mtu
	env      spec // the FELIX_* layer
	links    func() ([]linkMTU, error)
	last     int
}

func newMTUWatch(c *store.Client, node, libDir string, override int, env spec) *mtuWatch {
	return &mtuWatch{c: c, node: node, libDir: libDir, override: override, env: env, links: hostLinks}
}

// hostLinks lists this namespace's interfaces.
func hostLinks() ([]linkMTU, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing interfaces for MTU detection: %w", err)
	}
	out := make([]linkMTU, 0, len(links))
	for _, l := range links {
		a := l.Attrs()
		// Up as Felix counts it: operationally up (a link whose state is
		// unknown or down, such as a fresh cloud NIC, is skipped).
		out = append(out, linkMTU{Name: a.Name, MTU: a.MTU, Up: a.OperState == netlink.OperUp})
	}
	return out, nil
}

// inputs reads what the pod MTU depends on. The environment wins over
// FelixConfiguration node.<name>, which wins over the selector-scoped one
// matching the node (settings_scoped.go), which wins over default, as in Felix.
func (m *mtuWatch) inputs(ctx context.Context) (mtuInputs, error) {
	var in mtuInputs
	pk, _ := api.LookupKind("IPPool")
	objs, _, err := m.c.ListResources(ctx, pk, "")
	if err != nil {
		return in, fmt.Errorf("listing IP pools: %w", err)
	}
	pools := make([]*api.IPPool, 0, len(objs))
	for _, o := range objs {
		pools = append(pools, o.(*api.IPPool))
	}
	nk, _ := api.LookupKind("Node")
	var labels map[string]string
	switch n, err := m.c.GetResource(ctx, nk, "", m.node); {
	case err == nil:
		labels = n.GetObjectMeta().Labels
	case !errors.Is(err, store.ErrNotFound):
		return in, fmt.Errorf("reading node %s: %w", m.node, err)
	}
	in.Encaps = poolEncaps(pools, labels)
	// The same merge as the agent's settings (settings.go), so the pod
	// MTU and the VXLAN device agree.
	fk, _ := api.LookupKind("FelixConfiguration")
	objs, _, err = m.c.ListResources(ctx, fk, "")
	if err != nil {
		return in, fmt.Errorf("listing FelixConfigurations: %w", err)
	}
	var host, global *api.FelixConfiguration
	all := make([]*api.FelixConfiguration, 0, len(objs))
	for _, r := range objs {
		f := r.(*api.FelixConfiguration)
		switch f.Metadata.Name {
		case "node." + m.node:
			host = f
		case "default":
			global = f
		}
		all = append(all, f)
	}
	scoped, _ := scopedFor(labels, all)              // the agent's loader warns about several
	eff, _ := effective(m.env, host, scoped, global) // bad values: the agent's loader logs them
	in.Settings = mtuFromSpec(m.override, eff)
	if in.Settings.Pattern == "" {
		in.Settings.Pattern = DefaultMTUIfacePattern
	}
	if in.Pattern, err = regexp.Compile(in.Settings.Pattern); err != nil {
		// Validation refuses a bad pattern at write; another writer's
		// is logged and the default used.
		slog.Warn("mtuIfacePattern is not a regular expression; using the default", "pattern", in.Settings.Pattern, "err", err)
		in.Pattern = regexp.MustCompile(DefaultMTUIfacePattern)
	}
	if m.override == 0 {
		if in.Links, err = m.links(); err != nil {
			return in, err
		}
	}
	return in, nil
}

// update computes the pod MTU and writes it when it changed.
func (m *mtuWatch) update(ctx context.Context) (int, error) {
	in, err := m.inputs(ctx)
	if err != nil {
		return 0, err
	}
	mtu := podMTU(in)
	if mtu == m.last {
		return mtu, nil
	}
	if err := writeMTUFile(m.libDir, mtu); err != nil {
		return 0, err
	}
	slog.Info("pod MTU", "mtu", mtu, "hostMTU", hostMTU(in.Links, in.Pattern), "override", in.Settings.Override,
		"ipip", in.Encaps.IPIP, "vxlan", in.Encaps.VXLAN, "vxlanV6", in.Encaps.VXLANV6, "pattern", in.Settings.Pattern)
	m.last = mtu
	return mtu, nil
}

// run re-computes the MTU whenever a pool, this node or a
// FelixConfiguration changes, and every mtuRecheck for the interfaces.
func (m *mtuWatch) run(ctx context.Context) {
	kick := make(chan struct{}, 1)
	poke := func(store.Event) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	for _, kind := range []string{"IPPool", "FelixConfiguration"} {
		k, _ := api.LookupKind(kind)
		go func() { _ = m.c.Watch(ctx, store.ResourceListPrefix(k, ""), poke) }()
	}
	nk, _ := api.LookupKind("Node")
	nodeKey := store.ResourceKey(nk, "", m.node)
	go func() {
		_ = m.c.Watch(ctx, nodeKey, func(e store.Event) {
			if e.Key == nodeKey || e.Type == store.EventSynced {
				poke(e)
			}
		})
	}()
	t := time.NewTicker(mtuRecheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-t.C:
		}
		if _, err := m.update(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("pod MTU not updated", "err", err)
		}
	}
}

// writeMTUFile replaces <libDir>/mtu atomically.
func writeMTUFile(libDir string, mtu int) error {
	if err := os.MkdirAll(libDir, 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	tmp := filepath.Join(libDir, ".mtu.tmp")
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(mtu)), 0o644); err != nil {
		return fmt.Errorf("writing mtu: %w", err)
	}
	return os.Rename(tmp, filepath.Join(libDir, "mtu"))
}

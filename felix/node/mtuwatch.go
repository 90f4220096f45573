package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// mtuRecheck: without a signal of host interface changes, the host
// interfaces are re-read this often; with one (Run's links), only every
// mtuRecheckSignalled (Calico's interfaceRefreshInterval default), as a
// fallback for a missed change: listing every interface, the pods' veths
// included, was most of an idle agent's CPU (issue #25).
const (
	mtuRecheck          = 30 * time.Second
	mtuRecheckSignalled = 90 * time.Second
)

// MTUWatch keeps <lib-dir>/mtu equal to the pod MTU as pools, this node's
// labels, FelixConfiguration and the host interfaces change.
type MTUWatch struct {
	c        *store.Client
	node     string
	libDir   string
	override int                        // --mtu
	env      api.FelixConfigurationSpec // the FELIX_* layer
	links    func() ([]LinkMTU, error)
	last     int
	cached   *MTUInputs // the datastore part of the last inputs; nil until read
}

// NewMTUWatch watches for the node named name, writing <libDir>/mtu;
// override is --mtu (0: detect), env the FELIX_* layer of the settings.
func NewMTUWatch(c *store.Client, name, libDir string, override int, env api.FelixConfigurationSpec) *MTUWatch {
	return &MTUWatch{c: c, node: name, libDir: libDir, override: override, env: env, links: HostLinks}
}

// inputs reads what the pod MTU depends on: the datastore part (storeInputs)
// and the host interfaces.
func (m *MTUWatch) inputs(ctx context.Context) (MTUInputs, error) {
	in, err := m.storeInputs(ctx)
	if err != nil {
		return in, err
	}
	m.cached = &in
	return m.withLinks(in)
}

// withLinks adds the host interfaces to in (none with --mtu: they are not used).
func (m *MTUWatch) withLinks(in MTUInputs) (MTUInputs, error) {
	if m.override != 0 {
		return in, nil
	}
	links, err := m.links()
	if err != nil {
		return in, err
	}
	in.Links = links
	return in, nil
}

// storeInputs reads pools, this node's labels and the settings. The environment
// wins over FelixConfiguration node.<name>, which wins over the selector-scoped
// one matching the node (felix/config/scoped.go), which wins over default, as in Felix.
func (m *MTUWatch) storeInputs(ctx context.Context) (MTUInputs, error) {
	var in MTUInputs
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
	in.Encaps = PoolEncaps(pools, labels)
	// The same merge as the agent's settings (felix/config/settings.go), so the pod
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
	scoped, _ := config.ScopedFor(labels, all)              // the agent's loader warns about several
	eff, _ := config.Effective(m.env, host, scoped, global) // bad values: the agent's loader logs them
	in.Settings = MTUFromSpec(m.override, eff)
	if in.Settings.Pattern == "" {
		in.Settings.Pattern = config.DefaultMTUIfacePattern
	}
	if in.Pattern, err = regexp.Compile(in.Settings.Pattern); err != nil {
		// Validation refuses a bad pattern at write; another writer's
		// is logged and the default used.
		slog.Warn("mtuIfacePattern is not a regular expression; using the default", "pattern", in.Settings.Pattern, "err", err)
		in.Pattern = regexp.MustCompile(config.DefaultMTUIfacePattern)
	}
	return in, nil
}

// Update reads all inputs, computes the pod MTU and writes it when it changed.
func (m *MTUWatch) Update(ctx context.Context) (int, error) {
	in, err := m.inputs(ctx)
	if err != nil {
		return 0, err
	}
	return m.apply(in)
}

// recheck re-reads only the host interfaces: the datastore inputs are watched,
// so the periodic recheck reuses the last read of them and makes no datastore
// request. Before the first read it is Update.
func (m *MTUWatch) recheck(ctx context.Context) (int, error) {
	if m.cached == nil {
		return m.Update(ctx)
	}
	in, err := m.withLinks(*m.cached)
	if err != nil {
		return 0, err
	}
	return m.apply(in)
}

// mayMatter says whether a change of host interface name ("": any) may
// change the pod MTU: never with --mtu (the interfaces are not read),
// else only for an interface mtuIfacePattern matches.
func (m *MTUWatch) mayMatter(name string) bool {
	if m.override != 0 {
		return false
	}
	return name == "" || m.cached == nil || m.cached.Pattern == nil || m.cached.Pattern.MatchString(name)
}

// apply computes the pod MTU from in and writes it when it changed.
func (m *MTUWatch) apply(in MTUInputs) (int, error) {
	mtu := PodMTU(in)
	if mtu == m.last {
		return mtu, nil
	}
	if err := WriteMTUFile(m.libDir, mtu); err != nil {
		return 0, err
	}
	slog.Info("pod MTU", "mtu", mtu, "node.HostMTU", HostMTU(in.Links, in.Pattern), "override", in.Settings.Override,
		"ipip", in.Encaps.IPIP, "vxlan", in.Encaps.VXLAN, "vxlanV6", in.Encaps.VXLANV6, "pattern", in.Settings.Pattern)
	m.last = mtu
	return mtu, nil
}

// Run re-computes the MTU whenever a pool, this node or a
// FelixConfiguration changes, and re-reads only the interfaces when links
// names a host interface that mtuIfacePattern matches ("": any;
// hostiface.Watch.Links) and every mtuRecheckSignalled, or every
// mtuRecheck with no links (nil). Other interfaces (another plugin's
// veths, say) cannot change the MTU and cost nothing.
func (m *MTUWatch) Run(ctx context.Context, links <-chan string) {
	kick := make(chan struct{}, 1)
	poke := func(store.Event) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	for _, kind := range []string{"IPPool", "FelixConfiguration"} {
		go func() { _ = m.c.Watch(ctx, store.ListOptions{Kind: kind}, poke) }()
	}
	nodeKey := store.Key{Kind: "Node", Name: m.node}
	go func() {
		_ = m.c.Watch(ctx, store.ListOptions{Kind: "Node"}, func(e store.Event) {
			if e.Key == nodeKey || e.Type == store.EventSynced {
				poke(e)
			}
		})
	}()
	every := mtuRecheck
	if links != nil {
		every = mtuRecheckSignalled
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		update := m.Update
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case name := <-links:
			if !m.mayMatter(name) {
				continue
			}
			update = m.recheck
		case <-t.C:
			if !m.mayMatter("") {
				continue
			}
			update = m.recheck
		}
		if _, err := update(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("pod MTU not updated", "err", err)
		}
	}
}

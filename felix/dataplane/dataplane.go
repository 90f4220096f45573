package dataplane

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/calico-aio/calico-aio/iptables"
)

// Desired is the whole kernel state the calculation wants.
type Desired struct {
	// Tables by IP version (4, 6) and table name (filter, nat, mangle, raw).
	// A chain slice given to Apply is never changed afterwards: the very
	// same slice (same array and length) given again means the same
	// chains, and costs no comparison (the agent's calculation cache hands
	// its last output again when nothing it reads changed).
	Tables    map[int]map[string][]iptables.Chain
	IPSets    map[string]IPSet
	Endpoints []LocalEndpoint
	Routes    map[netip.Prefix]RouteTarget
	// Forwarding is the host-wide IP forwarding (FelixConfiguration
	// ipForwarding); its zero value turns IPv4 forwarding on.
	Forwarding Forwarding
	// ChainInsertMode is FelixConfiguration chainInsertMode: "Append" puts
	// the jumps to our chains last in the built-in chains; anything else
	// (Calico's default, Insert) first.
	ChainInsertMode string
	// IPTablesBackend is FelixConfiguration iptablesBackend: "Legacy" or
	// "NFT" pick iptables-legacy-* or iptables-nft-*; anything else (Auto)
	// the system's iptables-save/-restore. A change removes our chains
	// from the backend left.
	IPTablesBackend string
	// KeepExternalRoutes leaves routes others put on cali* interfaces
	// (FelixConfiguration removeExternalRoutes false); by default they go
	// after a grace period.
	KeepExternalRoutes bool
	// IPTablesLockTimeout and IPTablesLockProbeInterval are Felix's
	// iptablesLockTimeout and iptablesLockProbeInterval, handed to
	// iptables-restore's --wait (iptables.TableOptions); a change rebuilds
	// the table drivers.
	IPTablesLockTimeout, IPTablesLockProbeInterval time.Duration
	// MaxIPSetSize is FelixConfiguration maxIpsetSize: the maxelem of our
	// IP sets (0: the iptables package's default, Calico's 1048576).
	MaxIPSetSize int
	// VXLAN and VXLANV6 are the overlay devices and their peers (vxlan.go).
	VXLAN, VXLANV6 VXLAN
	// IPIP is tunl0 (ipip.go); nil takes its address off.
	IPIP   *IPIPDevice
	InSync bool

	// DeviceRouteProtocol is the protocol of the routes to local workloads
	// (FelixConfiguration deviceRouteProtocol; 0: rtproto.Workload). The
	// agent puts it on those routes (RouteTarget.Proto); the route manager
	// needs it to recognise them.
	DeviceRouteProtocol int
	// WorkloadIfacePrefixes name the workload interfaces
	// (FelixConfiguration interfacePrefix; nil: "cali").
	WorkloadIfacePrefixes IfacePrefixes
	// NetlinkTimeout is FelixConfiguration netlinkTimeout: the send and
	// receive timeout of the dataplane's own netlink socket (nlhandle.go;
	// 0: Calico's default 10s, negative: none). A change replaces the
	// socket before the next netlink request.
	NetlinkTimeout time.Duration
	// RouteSync is routeSyncDisabled (routes_sync.go).
	RouteSync RouteSync
}

// IPSet is one desired IP set.
type IPSet struct {
	Type    string
	Family  string
	Members []string
}

// builtinHooks: which of our top-level chains hook which built-in chain.
var builtinHooks = map[string]map[string]string{
	"filter": {"INPUT": "cali-INPUT", "FORWARD": "cali-FORWARD", "OUTPUT": "cali-OUTPUT"},
	"nat":    {"PREROUTING": "cali-PREROUTING", "POSTROUTING": "cali-POSTROUTING", "OUTPUT": "cali-OUTPUT"},
	"mangle": {"PREROUTING": "cali-PREROUTING", "POSTROUTING": "cali-POSTROUTING"},
	"raw":    {"PREROUTING": "cali-PREROUTING", "OUTPUT": "cali-OUTPUT"},
}

// tableState is one (version, table) with the hooks it was built with.
type tableState struct {
	t     *iptables.Table
	hooks string
	last  lastChains // what SetChains was last given (tables_same.go)
}

// Dataplane owns the kernel state of the node. It is used from one
// goroutine only: the agent's loop.
type Dataplane struct {
	ipv6    bool
	tables  map[string]*tableState // "4/filter"
	ipsets  *iptables.IPSets
	sets    map[string]IPSet // name -> what was last set (its members shared with the caller, never changed)
	routes  *routeManager
	eps     *endpointManager
	qos     *qosManager
	fwd     *forwardingManager
	vxlan   *vxlanManager
	vxlan6  *vxlanManager
	ipip    *ipipManager
	lastErr error
	obs     iptables.Observer
	// backend is the iptables backend the tables were built for.
	backend string
	// lockTimeout and lockProbe are the xtables lock wait the next tables
	// are built with.
	lockTimeout, lockProbe time.Duration
	// nl is the netlink handle every manager uses (nlhandle.go).
	nl *nlHandle
	// gens follows the nf_tables generation for all the tables, so that
	// a resync reads them back only after a change not ours.
	gens *iptables.Generations
	// restores are the long-lived iptables-restores of the tables, on
	// the nf_tables backend (iptables/session.go).
	restores *iptables.Sessions
}

// Config of the dataplane.
type Config struct {
	IPv6             bool
	RouteGracePeriod time.Duration // before removing unknown routes on cali* interfaces
	// Observer, when set, is told of every iptables and ipset command run
	// (the agent's metrics).
	Observer iptables.Observer
}

// New makes a dataplane; it touches nothing until Apply.
func New(cfg Config) *Dataplane {
	if cfg.RouteGracePeriod == 0 {
		cfg.RouteGracePeriod = 30 * time.Second
	}
	d := &Dataplane{
		ipv6: cfg.IPv6, tables: map[string]*tableState{}, ipsets: iptables.NewIPSets(iptables.IPSetsOptions{Observer: cfg.Observer}),
		sets: map[string]IPSet{}, routes: newRouteManager(cfg.RouteGracePeriod), eps: newEndpointManager(), qos: newQoSManager(),
		fwd: newForwardingManager(), vxlan: newVXLANManager("vxlan.calico"), vxlan6: newVXLANManager("vxlan-v6.calico"),
		ipip: newIPIPManager("tunl0"), obs: cfg.Observer, nl: newNLHandle(), gens: &iptables.Generations{},
		restores: iptables.NewSessions(),
	}
	// One handle for all: the socket is made in the namespace of the
	// first apply and replaced only from the dataplane's goroutine.
	d.routes.nl, d.eps.nl, d.qos.nl, d.vxlan.nl, d.vxlan6.nl, d.ipip.nl = d.nl, d.nl, d.nl, d.nl, d.nl, d.nl
	return d
}

// Close releases the dataplane's netlink socket and ends its long-lived
// iptables-restores (the kernel state stays).
func (d *Dataplane) Close() {
	d.nl.close()
	d.restores.Close()
}

func (d *Dataplane) table(ver int, name string, chains []iptables.Chain, appendHooks bool) *iptables.Table {
	hooks := map[string]string{}
	var sig []string
	for builtin, ours := range builtinHooks[name] {
		if slices.ContainsFunc(chains, func(c iptables.Chain) bool { return c.Name == ours }) {
			hooks[builtin] = ours
			sig = append(sig, builtin+">"+ours)
		}
	}
	slices.Sort(sig)
	if appendHooks {
		sig = append(sig, "append")
	}
	sig = append(sig, fmt.Sprintf("wait=%s/%s", d.lockTimeout, d.lockProbe))
	key := tableKey(ver, name)
	st := d.tables[key]
	if st == nil || st.hooks != strings.Join(sig, ",") {
		// SharedRules: the chains come from the calculation, which never
		// changes a chain's rules once rendered (rules.Memo keeps them).
		opts := iptables.TableOptions{Hooks: hooks, AppendHooks: appendHooks, LockWait: true, Observer: d.obs, SharedRules: true,
			LockTimeout: d.lockTimeout, LockProbeInterval: d.lockProbe, Generations: d.gens, Sessions: d.restores}
		opts.SaveCmd, opts.RestoreCmd = backendCmds(ver, d.backend)
		st = &tableState{t: iptables.NewTable(name, ver, opts), hooks: strings.Join(sig, ",")}
		d.tables[key] = st
	}
	return st.t
}

// Apply makes the kernel match desired: host-wide forwarding, IP sets that
// rules will reference, then the tables, then IP sets no longer
// referenced, then routes, endpoints and their shaping. Every step runs; their errors are
// joined.
func (d *Dataplane) Apply(des Desired) error {
	var errs []error
	d.nl.want = des.NetlinkTimeout // a change replaces the socket now, not at the next netlink need
	if err := d.nl.ready(); err != nil {
		errs = append(errs, err)
	} else {
		d.nl.held = true // one namespace check per apply, not one per manager
		defer d.nl.release()
	}
	d.fwd.SetDesired(des.Forwarding)
	if err := d.fwd.Apply(); err != nil {
		errs = append(errs, fmt.Errorf("ip forwarding: %w", err))
	}
	if b := normBackend(des.IPTablesBackend); b != d.backend {
		if err := d.switchBackend(b); err != nil {
			errs = append(errs, fmt.Errorf("leaving iptables backend %q: %w", d.backend, err))
		}
	}
	d.lockTimeout, d.lockProbe = des.IPTablesLockTimeout, des.IPTablesLockProbeInterval
	d.ipsets.SetMaxElem(des.MaxIPSetSize)
	removed := d.setIPSets(des.IPSets)
	if err := d.ipsets.Apply(); err != nil {
		errs = append(errs, fmt.Errorf("ipsets: %w", err))
	}
	for _, ver := range []int{4, 6} {
		if ver == 6 && !d.ipv6 {
			continue
		}
		for _, name := range []string{"raw", "mangle", "nat", "filter"} {
			t, _ := d.setChains(ver, name, des.Tables[ver][name], des.ChainInsertMode == "Append")
			if _, err := t.Apply(); err != nil {
				errs = append(errs, fmt.Errorf("ip%stables %s: %w", map[int]string{4: "", 6: "6"}[ver], name, err))
			}
		}
	}
	if len(removed) > 0 {
		for _, name := range removed {
			d.ipsets.RemoveIPSet(name)
		}
		if err := d.ipsets.Apply(); err != nil {
			errs = append(errs, fmt.Errorf("removing ipsets: %w", err))
		}
	}
	// tunl0 before the routes over it (a new device makes them re-read).
	d.ipip.SetDesired(des.IPIP, des.InSync)
	if d.ipip.dirty {
		d.routes.dirty = true
	}
	if err := d.ipip.Apply(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", d.ipip.name, err))
	}
	errs = append(errs, applyOverlayAndRoutes(d.vxlan, d.vxlan6, d.routes, des)...)
	if len(des.WorkloadIfacePrefixes) > 0 {
		d.eps.prefixes = des.WorkloadIfacePrefixes
	}
	d.eps.SetDesired(des.Endpoints, des.InSync)
	if err := d.eps.Apply(); err != nil {
		errs = append(errs, fmt.Errorf("endpoints: %w", err))
	}
	d.qos.SetDesired(des.Endpoints, des.InSync)
	if err := d.qos.Apply(); err != nil {
		errs = append(errs, fmt.Errorf("qos: %w", err))
	}
	d.lastErr = errors.Join(errs...)
	if d.lastErr != nil {
		slog.Warn("dataplane apply incomplete; will retry", "err", d.lastErr)
	}
	return d.lastErr
}

// normBackend is "legacy", "nft" or "" (the system's iptables).
func normBackend(b string) string {
	switch strings.ToLower(b) {
	case "legacy":
		return "legacy"
	case "nft":
		return "nft"
	}
	return ""
}

// backendCmds are the save and restore binaries of a backend ("" for the
// defaults).
func backendCmds(ver int, backend string) (save, restore string) {
	if backend == "" {
		return "", ""
	}
	p := "iptables-"
	if ver == 6 {
		p = "ip6tables-"
	}
	return p + backend + "-save", p + backend + "-restore"
}

// switchBackend removes our chains and hooks from every table of the
// backend in use and makes the next tables use b. A table whose removal
// fails keeps the switch pending (retried on the next apply).
func (d *Dataplane) switchBackend(b string) error {
	var errs []error
	for key, st := range d.tables {
		st.t.SetChains(nil)
		st.last = lastChains{} // kept on failure: the next chains must be set again
		if _, err := st.t.Apply(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			continue
		}
		delete(d.tables, key)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	slog.Info("iptables backend", "from", d.backend, "to", b)
	d.backend = b
	d.restores.Close() // the next tables' binaries start their own
	return nil
}

// setIPSets hands changed sets to the driver and returns the names of sets
// that are no longer desired (removed after the tables stop using them).
func (d *Dataplane) setIPSets(want map[string]IPSet) []string {
	for name, s := range want {
		if old, ok := d.sets[name]; ok && old.Type == s.Type && old.Family == s.Family && slices.Equal(old.Members, s.Members) {
			continue // compared in place: the calculation hands on an unchanged set's own slice
		}
		if err := d.ipsets.SetIPSet(name, s.Type, s.Family, s.Members); err != nil {
			slog.Warn("bad ipset", "name", name, "err", err)
			continue
		}
		d.sets[name] = s
	}
	var removed []string
	for name := range d.sets {
		if _, ok := want[name]; !ok {
			removed = append(removed, name)
			delete(d.sets, name)
		}
	}
	return removed
}

// NeedsRetry reports whether the last apply left work undone.
func (d *Dataplane) NeedsRetry() bool {
	return d.lastErr != nil || d.routes.dirty || d.eps.dirty || d.qos.dirty || d.fwd.dirty || d.vxlan.dirty || d.vxlan6.dirty || d.ipip.dirty
}

// Resync makes the next Apply re-read everything from the kernel, so drift
// made by others is repaired.
func (d *Dataplane) Resync() {
	d.ResyncRoutes()
	d.ResyncInterfaces()
	d.ResyncIPTables()
	d.ResyncIPSets()
}

// ResyncRoutes makes the next Apply re-read routes and the VXLAN devices
// (FelixConfiguration routeRefreshInterval).
func (d *Dataplane) ResyncRoutes() {
	d.routes.dirty = true
	d.vxlan.dirty, d.vxlan6.dirty, d.ipip.dirty = true, true, true
}

// ResyncInterfaces makes the next Apply re-read the endpoints' interface
// settings and the host's forwarding (interfaceRefreshInterval).
func (d *Dataplane) ResyncInterfaces() {
	d.eps.resyncAll()
	d.qos.resyncAll()
	d.fwd.resync()
}

// ResyncIPTables makes the next Apply re-read every table that may have
// changed (iptablesRefreshInterval): on the nf_tables backend only when the
// kernel's nf_tables generation moved (iptables/nftgen.go).
func (d *Dataplane) ResyncIPTables() {
	for _, st := range d.tables {
		st.t.Resync()
	}
}

// ResyncIPSets makes the next Apply re-read the IP sets
// (ipsetsRefreshInterval).
func (d *Dataplane) ResyncIPSets() {
	if inv, ok := any(d.ipsets).(interface{ InvalidateCache() }); ok {
		inv.InvalidateCache()
	}
}

// applyOverlayAndRoutes programs the VXLAN devices before the routes that
// go over them; a device change (a replaced device loses its routes) makes
// the routes be read back.
func applyOverlayAndRoutes(vm, vm6 *vxlanManager, rm *routeManager, des Desired) []error {
	var errs []error
	for _, x := range []struct {
		m *vxlanManager
		v VXLAN
	}{{vm, des.VXLAN}, {vm6, des.VXLANV6}} {
		x.m.SetDesired(x.v, des.InSync)
		if x.m.dirty {
			rm.dirty = true
		}
		if err := x.m.Apply(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", x.m.name, err))
		}
	}
	rm.setDevice(des.DeviceRouteProtocol, des.WorkloadIfacePrefixes)
	if rm.keepForeign != des.KeepExternalRoutes {
		rm.keepForeign, rm.dirty = des.KeepExternalRoutes, true
	}
	rm.setSync(des.RouteSync)
	rm.SetDesired(des.Routes, des.InSync)
	if err := rm.Apply(); err != nil {
		errs = append(errs, fmt.Errorf("routes: %w", err))
	}
	return errs
}

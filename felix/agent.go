package felix

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/calico-aio/calico-aio/bgp"
	"github.com/calico-aio/calico-aio/build/gcfloor"
	"github.com/calico-aio/calico-aio/cni"
	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/felix/health"
	"github.com/calico-aio/calico-aio/felix/hostiface"
	"github.com/calico-aio/calico-aio/felix/metrics"
	"github.com/calico-aio/calico-aio/felix/node"
	"github.com/calico-aio/calico-aio/felix/peering"
	"github.com/calico-aio/calico-aio/felix/routes"
	"github.com/calico-aio/calico-aio/felix/status"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// spec is the FelixConfiguration spec, the shape of the effective settings.
type spec = api.FelixConfigurationSpec

// maxBatch bounds how many datastore updates are folded into one apply.
const maxBatch = 5000

// heapFloor is the heap the agent may reach before it collects garbage at
// all, once its first apply has programmed the node (build/gcfloor.HeapFloor;
// not before: the first programming's peak would stay in the RSS). Its
// live heap is 3-9 MB up to a few hundred pods and no policy, where
// GOGC=100 collected about once per two CNI calls; at 250 endpoints x
// 1,000 policies it is 16-19 MB, where this changes nothing.
const heapFloor = 32 << 20

// agent is the running node agent: one loop owns the calculation state and
// every kernel write.
type agent struct {
	cfg     config.Config
	store   *store.Client
	state   *calc.State
	dp      *dataplane.Dataplane
	health  *health.Health
	metrics *metrics.Metrics
	status  *status.Reporter
	// statusFiles are the endpoint status files (status/files.go).
	statusFiles *status.Files
	updates     chan calc.Update
	// extraRoutes are routes from other sources (BGP), merged into the desired routes.
	extraRoutes map[netip.Prefix]dataplane.RouteTarget
	ipv6        bool
	bgpState    *peering.State
	bgp         *peering.Runner // nil when BGP is off
	overlay     *calc.Overlay
	tunnels     *node.TunnelAddrs
	// settings is the effective FelixConfiguration (config/settings.go); the
	// calculation and the overlay see it as one "default" object.
	settings *config.Loader
	logs     *config.LogOutputs // nil: the logger is not ours to change
	// refreshes are the periodic kernel re-reads (config/refresh.go);
	// refreshChanged says a refresh interval changed since the loop last
	// scheduled them.
	refreshes      []*config.Refresh
	refreshChanged bool
	// statusTimer fires when the status reporter has work (status/report.go).
	statusTimer *time.Timer
	// ifaces signals host interface changes (hostiface/watch.go); nil in
	// tests that drive apply themselves.
	ifaces *hostiface.Watch
	// healthSrv and metricsSrv are nil until startServers.
	healthSrv, metricsSrv *config.Server
	// egress: how endpoints' egress bandwidth is enforced (routes/qos.go).
	egress routes.Egress
	// lock holds datastore changes while a migration locks it (lock.go).
	lock migrationLock
	// calc is the calculation's last output, reused until an input
	// changes (calccache.go).
	calc calcCache
	// cniBusy counts the CNI calls the agent serves; a due apply waits
	// for them, at most maxApplyHold (hold.go). nil: never holds.
	cniBusy   *cni.Busy
	floorOnce sync.Once // the heap floor, set after the first apply
}

func newAgent(cfg config.Config, c *store.Client, ipv6 bool) *agent {
	a := &agent{
		cfg: cfg, store: c, state: calc.NewState(cfg.NodeName), ipv6: ipv6,
		health:  health.New(3*housekeepingInterval(cfg) + 10*time.Second),
		metrics: metrics.New(cfg.NodeName, filepath.Join(cfg.LibDir, "pending-releases")), status: status.NewReporter(c, cfg.NodeName, status.Config{}),
		updates: make(chan calc.Update, 1024), extraRoutes: map[netip.Prefix]dataplane.RouteTarget{},
		bgpState: peering.NewState(cfg.NodeName, cfg.BGPSecretsDir),
		overlay:  calc.NewOverlay(cfg.NodeName), tunnels: node.NewTunnelAddrs(c, cfg.NodeName),
		settings: config.NewLoader(cfg.NodeName, cfg.FelixEnv), logs: cfg.Logs,
		statusFiles: &status.Files{},
	}
	a.dp = dataplane.New(dataplane.Config{IPv6: true, Observer: a.metrics.ObserveExec}) // v6 tables emptied when there is no IPv6
	a.egress = routes.ProbeEgress()
	a.state.SetEgressPolicing(a.egress.Policed())
	a.foldSettings() // the environment's values before any object arrives
	cur := a.settings.Current()
	a.status.Configure(status.ConfigOf(&cur))
	return a
}

// fold records one datastore update in every consumer.
func (a *agent) fold(u calc.Update) {
	held, release := a.lock.hold(u)
	if held {
		return
	}
	for _, r := range release {
		a.fold(r)
	}
	a.foldOne(u)
}

// foldOne takes one update into the agent's state.
func (a *agent) foldOne(u calc.Update) {
	if u.Kind == calc.KindBlock {
		a.calc.invalidateBlocks() // blocks feed only the blackholes (calccache.go)
	} else {
		a.calc.invalidate()
	}
	if mine, changed := a.settings.Apply(u); mine && (u.Kind == "felixconfigurations" || len(changed) > 0) {
		a.foldSettings()
		a.settingsChanged(changed)
	}
	if u.Kind == "felixconfigurations" {
		a.metrics.ObserveUpdate(u)
		return
	}
	a.state.Apply(u)
	a.bgpState.Apply(u)
	a.overlay.Apply(u)
	if node.TunnelKick(u, a.cfg.NodeName) {
		a.tunnels.Poke()
	}
	a.metrics.ObserveUpdate(u)
}

// foldSettings hands the effective configuration to its consumers in the
// loop: the calculation (endpoint-to-host action, failsafe ports, IP
// forwarding) and the overlay (vxlan* fields) read it as the object
// "default"; node.<name> never reaches them, its values are in it.
func (a *agent) foldSettings() {
	u := a.settings.EffectiveUpdate()
	a.calc.invalidate()
	a.state.Apply(u)
	a.overlay.Apply(u)
	cur := a.settings.Current()
	if a.logs != nil {
		a.logs.Apply(&cur)
	}
	if a.health != nil {
		a.health.SetOverrides(cur.HealthTimeoutOverrides)
	}
	if a.metrics != nil {
		a.metrics.SetRuntimeCollectors(config.BoolOr(cur.PrometheusGoMetricsEnabled, true), config.BoolOr(cur.PrometheusProcessMetricsEnabled, true))
	}
}

// settingsChanged logs what a FelixConfiguration change changed. Every
// supported setting applies live: the values above reach the next apply.
func (a *agent) settingsChanged(changed []string) {
	cur := a.settings.Current()
	servers := false
	for _, name := range changed {
		servers = servers || strings.HasPrefix(name, "health") || strings.HasPrefix(name, "prometheusMetrics")
		if slices.ContainsFunc(a.refreshes, func(r *config.Refresh) bool { return r.Name == name }) {
			a.refreshChanged = true
		}
		if strings.Contains(strings.ToLower(name), "reporting") {
			a.status.Configure(status.ConfigOf(&cur))
		}
		slog.Info("configuration changed", "setting", name, "value", config.SettingValue(&cur, name))
	}
	if servers && a.healthSrv != nil {
		if err := a.setServers(); err != nil {
			slog.Error("moving the health or metrics server", "err", err)
		}
	}
}

// housekeepingInterval is how often the CNI journal is replayed and the
// tunnel addresses are checked: --resync-interval, 30 s when unset.
func housekeepingInterval(cfg config.Config) time.Duration {
	if cfg.ResyncInterval > 0 {
		return cfg.ResyncInterval
	}
	return 30 * time.Second
}

func (a *agent) housekeepingInterval() time.Duration { return housekeepingInterval(a.cfg) }

// rescheduleRefresh sets t to fire when the next refresh is due under the
// current intervals (a shortened interval may make one due at once).
func (a *agent) rescheduleRefresh(t *time.Timer) {
	cur := a.settings.Current()
	next := time.Duration(0)
	for _, r := range a.refreshes {
		iv := r.Interval(&cur)
		if iv <= 0 {
			continue
		}
		wait := max(time.Until(r.Last.Add(iv)), 0)
		if next == 0 || wait < next {
			next = max(wait, time.Millisecond)
		}
	}
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	if next > 0 {
		t.Reset(next)
	}
}

// loop is the agent's single owner of kernel state: it folds datastore
// updates into the calculation, applies the result, retries failures and
// resyncs periodically.
func (a *agent) loop(ctx context.Context) error {
	housekeeping := time.NewTicker(a.housekeepingInterval())
	defer housekeeping.Stop()
	a.refreshes = config.NewRefreshes(time.Now())
	refresh := time.NewTimer(time.Hour)
	defer refresh.Stop()
	a.rescheduleRefresh(refresh)
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	heartbeat := time.NewTicker(5 * time.Second)
	defer heartbeat.Stop()
	a.statusTimer = time.NewTimer(time.Hour)
	defer a.statusTimer.Stop()
	a.scheduleStatus()
	a.health.Beat()
	go a.tunnels.Run(ctx, a.housekeepingInterval())
	if a.ifaces == nil { // Run hands over the one it started
		a.ifaces = hostiface.NewWatch()
		go a.ifaces.Run(ctx)
	}
	dirty := false
	hold := newApplyHold()
	defer hold.timer.Stop()
	for {
		select {
		case <-hold.idle:
			hold.idle = nil
		case <-hold.timer.C:
		case <-ctx.Done():
			if a.bgp != nil {
				a.bgp.Stop()
			}
			return nil
		case u := <-a.updates:
			a.fold(u)
		drain: // fold in whatever else is queued
			for n := 0; n < maxBatch; n++ {
				select {
				case u := <-a.updates:
					a.fold(u)
				default:
					break drain
				}
			}
			if a.refreshChanged {
				a.refreshChanged = false
				a.rescheduleRefresh(refresh)
			}
			a.scheduleStatus() // a reporting setting may have changed
			dirty = true
		case evs := <-a.bgpRoutes():
			a.bgp.ApplyEvents(a.extraRoutes, evs)
			a.metrics.BGPRouteUpdates(evs)
			dirty = true
		case <-refresh.C:
			cur := a.settings.Current()
			ran, next := config.DueRefreshes(a.refreshes, &cur, a.dp, time.Now())
			if slices.Contains(ran, "interfaceRefreshInterval") {
				a.statusFiles.Resync()
				a.ifaces.RecheckIPVS()
			}
			if slices.Contains(ran, "routeRefreshInterval") && a.bgp != nil {
				a.bgp.ResyncLearned(a.extraRoutes)
			}
			if len(ran) > 0 {
				a.metrics.Resync()
				slog.Debug("refreshing from the kernel", "parts", ran)
				dirty = true
			}
			if next > 0 {
				refresh.Reset(next)
			}
		case <-a.ifaces.C:
			dirty = true
		case <-housekeeping.C:
			a.replayJournal(ctx)
		case <-retry.C:
			dirty = true
		case <-heartbeat.C:
			a.health.Beat()
			if a.bgp != nil && a.bgp.Holding() { // release held BGP routes once converged
				a.bgp.ResyncLearned(a.extraRoutes)
				dirty = true
			}
		case <-a.statusTimer.C:
			a.reportStatus(ctx)
		}
		a.health.Beat()
		if !dirty || !a.state.InSync() {
			continue
		}
		if hold.wait(a.cniBusy, time.Now()) {
			continue
		}
		dirty = false
		err := a.apply(ctx)
		if a.bgp != nil {
			if berr := a.bgp.Sync(ctx, a.bgpState, a.extraRoutes); berr != nil {
				slog.Warn("BGP sync incomplete", "err", berr)
				err = errors.Join(err, berr)
			}
		}
		if err != nil || a.dp.NeedsRetry() {
			retry.Reset(time.Second)
		}
	}
}

// bgpRoutes is the speaker's route channel (nil, never ready, without BGP).
func (a *agent) bgpRoutes() <-chan []bgp.RouteEvent {
	if a.bgp == nil {
		return nil
	}
	return a.bgp.Routes()
}

// apply computes and programs the desired state.
func (a *agent) apply(ctx context.Context) error {
	start := time.Now()
	workload := dataplane.ParseIfacePrefixes(a.settings.Current().InterfacePrefix)
	// IPVS mode's this-host set; host endpoints by expectedIPs
	ipvs := a.state.KubeIPVS()
	needIfaces := hostiface.KubeIPVS(a.ifaces, a.dp, a.state, a.settings.Current().IptablesMarkMask) || a.state.NeedsHostInterfaces()
	if a.state.KubeIPVS() != ipvs {
		a.calc.invalidate()
	}
	if a.ifaces != nil {
		a.ifaces.SetWorkload(workload)
		a.ifaces.SetNeeded(needIfaces)
	}
	if needIfaces {
		if ifaces, err := a.dp.HostInterfaces(workload); err == nil {
			a.state.SetHostInterfaces(ifaces)
			a.calc.invalidate()
		} else {
			slog.Warn("reading host interfaces", "err", err)
		}
	}
	cur := a.settings.Current()
	v6Support := cur.IPv6Support == nil || *cur.IPv6Support // ipv6Support, Calico's default true
	d := a.calc.desired(a.state, v6Support && (a.ipv6 || a.state.HasIPv6Pools()))
	calcDone := time.Now()
	des := dataplane.Desired{InSync: true, IPSets: make(map[string]dataplane.IPSet, len(d.IPSets)),
		Routes: make(map[netip.Prefix]dataplane.RouteTarget, len(d.Endpoints)+len(d.Blackholes)),
		Tables: map[int]map[string][]iptables.Chain{}, Forwarding: dataplane.Forwarding{Mode: d.IPForwarding, IPv6: d.IPv6},
		ChainInsertMode: cur.ChainInsertMode, IPTablesBackend: cur.IptablesBackend,
		KeepExternalRoutes: cur.RemoveExternalRoutes != nil && !*cur.RemoveExternalRoutes}
	if cur.IptablesLockTimeout != nil {
		des.IPTablesLockTimeout = cur.IptablesLockTimeout.Duration
	}
	if cur.IptablesLockProbeInterval != nil {
		des.IPTablesLockProbeInterval = cur.IptablesLockProbeInterval.Duration
	}
	if cur.MaxIpsetSize != nil {
		des.MaxIPSetSize = *cur.MaxIpsetSize
	}
	des.NetlinkTimeout = config.NetlinkTimeout(&cur)
	a.metrics.CheckNFTables(cur.NFTablesMode, time.Now(), dataplane.KubeProxyNFTables)
	des.RouteSync = dataplane.RouteSync{Disabled: config.BoolOr(cur.RouteSyncDisabled, false), BGPBlackholes: a.bgp != nil}
	for ver, t := range d.Tables {
		des.Tables[ver] = map[string][]iptables.Chain{"filter": t.Filter, "nat": t.NAT, "mangle": t.Mangle, "raw": t.Raw}
	}
	for name, s := range d.IPSets {
		des.IPSets[name] = dataplane.IPSet{Type: s.Type, Family: s.Family, Members: s.Members}
	}
	// Statuses only when they are reported (an empty set otherwise: the
	// reporter then writes none).
	var statuses map[string]string
	if a.status.ReportsEndpoints() {
		statuses = make(map[string]string, len(d.Endpoints))
	}
	files := make(map[string]bool, len(d.Endpoints))
	des.Endpoints = make([]dataplane.LocalEndpoint, 0, len(d.Endpoints))
	dev := routes.DeviceRoutes(deviceRouteConfig(&cur))
	for _, ep := range d.Endpoints {
		des.Endpoints = append(des.Endpoints, dataplane.LocalEndpoint{Iface: ep.Iface, Addrs: ep.Addrs, MAC: ep.MAC,
			Shaping: dataplane.IngressShaping(ep.QoS), EgressShaping: a.egress.Shaping(ep.QoS)})
		for _, addr := range ep.Addrs {
			des.Routes[netip.PrefixFrom(addr, addr.BitLen())] = dev.Target(ep.Iface, addr)
		}
		if statuses != nil {
			statuses[a.status.EndpointKey(ep.Orchestrator, ep.Workload, ep.Endpoint)] = "up"
		}
		files[ep.StatusFile] = true
	}
	for _, b := range d.Blackholes {
		des.Routes[b] = dataplane.RouteTarget{Blackhole: true}
	}
	des.DeviceRouteProtocol = dev.Proto()
	des.WorkloadIfacePrefixes = dataplane.ParseIfacePrefixes(cur.InterfacePrefix)
	ov := a.overlay.Desired()
	routes.AddOverlay(&des, ov, peering.WithPriorities(a.extraRoutes, a.bgpState), routes.ParentIfaces(ov))
	if !v6Support {
		dropIPv6(&des)
	}
	err := a.dp.Apply(des)
	dpDone := time.Now()
	a.recordMetrics(d, des, time.Since(start), err)
	if err != nil {
		a.health.SetReady(false)
		return err
	}
	a.health.SetReady(true)
	a.floorOnce.Do(func() { gcfloor.HeapFloor(heapFloor) })
	a.status.SetEndpoints(statuses)
	a.reportStatus(ctx)
	a.statusFiles.Configure(status.FilesPrefix(&cur, a.cfg.RunDir))
	a.statusFiles.Set(files)
	if err := a.statusFiles.Sync(); err != nil {
		return fmt.Errorf("endpoint status files: %w", err)
	}
	slog.Debug("dataplane applied", "calc", calcDone.Sub(start), "dataplane", dpDone.Sub(calcDone), "status", time.Since(dpDone),
		"endpoints", len(d.Endpoints), "policies", d.LocalPolicies)
	return nil
}

// dropIPv6 takes everything IPv6 out of des (ipv6Support false): no
// ip6tables chains (the dataplane empties ours), IPv6 sets, routes, VXLAN
// device or endpoint addresses, so the dataplane removes what it had.
func dropIPv6(des *dataplane.Desired) {
	delete(des.Tables, 6)
	des.Forwarding.IPv6 = false
	for name, s := range des.IPSets {
		if s.Family == iptables.FamilyInet6 {
			delete(des.IPSets, name)
		}
	}
	for p := range des.Routes {
		if p.Addr().Is6() {
			delete(des.Routes, p)
		}
	}
	des.VXLANV6 = dataplane.VXLAN{}
	for i, ep := range des.Endpoints {
		des.Endpoints[i].Addrs = slices.DeleteFunc(slices.Clone(ep.Addrs), netip.Addr.Is6)
	}
}

// reportStatus writes the status reports due now and schedules the next.
func (a *agent) reportStatus(ctx context.Context) {
	if err := a.status.Tick(ctx, time.Now()); err != nil {
		slog.Warn("status report failed", "err", err)
	}
	a.scheduleStatus()
}

// scheduleStatus sets the status timer to the reporter's next work
// (a failed write is retried after a second).
func (a *agent) scheduleStatus() {
	if a.statusTimer == nil {
		return
	}
	if !a.statusTimer.Stop() {
		select {
		case <-a.statusTimer.C:
		default:
		}
	}
	if d := a.status.Next(time.Now()); d > 0 {
		a.statusTimer.Reset(max(d, 10*time.Millisecond))
	}
}

// replayJournal completes DELs the CNI plugin could not finish while the
// datastore was down.
func (a *agent) replayJournal(ctx context.Context) {
	dir := filepath.Join(a.cfg.LibDir, "pending-releases")
	if n, err := cni.ReplayJournal(ctx, a.store, ipam.New(a.store), dir); err != nil {
		slog.Warn("journal replay incomplete", "err", err)
	} else if n > 0 {
		slog.Info("replayed CNI journal", "entries", n)
	}
}

// startServers starts health and metrics where the flags or the
// settings say (config/servers.go); setServers moves them.
func (a *agent) startServers(ctx context.Context) error {
	a.healthSrv = &config.Server{Name: "health", Handler: a.health.Handler()}
	a.metricsSrv = &config.Server{Name: "metrics", Handler: a.metrics.Handler()}
	context.AfterFunc(ctx, func() { a.healthSrv.Close(); a.metricsSrv.Close() })
	return a.setServers()
}

// setServers makes the servers listen where they should now.
func (a *agent) setServers() error {
	cur := a.settings.Current()
	h, m := config.HealthAddr(&cur), config.MetricsAddr(&cur)
	if a.cfg.HealthAddrSet {
		h = a.cfg.HealthAddr
	}
	if a.cfg.MetricsAddrSet {
		m = a.cfg.MetricsAddr
	}
	return errors.Join(a.healthSrv.Set(h, config.TLSFiles{}), a.metricsSrv.Set(m, config.MetricsTLS(&cur)))
}

// deviceRouteConfig is what the settings say of the routes to local
// workloads (routes/devroutes.go).
func deviceRouteConfig(s *spec) routes.DeviceConfig {
	return routes.DeviceConfig{Src4: s.DeviceRouteSourceAddress, Src6: s.DeviceRouteSourceAddressIPv6,
		Proto: s.DeviceRouteProtocol, Metric4: s.IPv4NormalRoutePriority, Metric6: s.IPv6NormalRoutePriority}
}

// Package peering owns this node's BGP: whom it peers with and what it
// advertises, computed from the datastore (state.go), the embedded
// speaker's life beside the agent's loop (runner.go), its router ID and
// the status socket calicoctl node status reads.
package peering

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/bgp"
	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/internal/rtproto"
)

// StatusSocketName is the agent's status socket under the run directory;
// calicoctl node status reads it.
const StatusSocketName = "calico-node-status.sock"

// Config is what the runner takes from calico-node's flags.
type Config struct {
	NodeName string
	RouterID string // --router-id (CALICO_ROUTER_ID): an IPv4 address, "hash" or "" (the node's IPv4)
	Port     int    // --bgp-port: the listen port unless BGPConfiguration sets one
	Enabled  bool   // BGP runs (the status socket says so)
}

// NewRunner runs the speaker for a node with addresses self and self6
// (either may be invalid).
func NewRunner(cfg Config, self, self6 netip.Prefix) *Runner {
	return &Runner{cfg: cfg, self: self, self6: self6}
}

// Runner connects the embedded speaker to the agent loop: the loop
// hands it desired peers and advertisements; learned routes come back on a
// channel and only the loop turns them into kernel routes.
type Runner struct {
	cfg     Config
	self    netip.Prefix
	self6   netip.Prefix
	speaker *bgp.Speaker
	routes  <-chan []bgp.RouteEvent
	// published is the speaker for the status socket's goroutine.
	published atomic.Pointer[bgp.Speaker]

	// kept are the BGP routes a previous run left in the kernel, adopted
	// into the learned routes before the first apply (adoptKept) and held
	// until the speaker has converged or keptUntil passes, so a restart
	// deletes no route that is still good (GOBGP-NOTES trap 8).
	kept      map[netip.Prefix]dataplane.RouteTarget
	keptUntil time.Time
	// reconfigured: the speaker was replaced in this process (its
	// successor is not a restarting speaker: it has no previous run's
	// state to wait for).
	reconfigured bool
}

// Routes is the speaker's route channel (nil before it starts).
func (r *Runner) Routes() <-chan []bgp.RouteEvent { return r.routes }

// Speaker is the running speaker (nil when none runs).
func (r *Runner) Speaker() *bgp.Speaker { return r.published.Load() }

// keptHold bounds how long routes of a previous run are held for peers that
// do not come back (the deferral time of a restarting speaker).
const keptHold = 30 * time.Second

// keptBGPRoutes reports whether the kernel still holds routes we learned
// before a restart (then peers may treat us as gracefully restarting).
func keptBGPRoutes() bool {
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Protocol: rtproto.BGP}, netlink.RT_FILTER_PROTOCOL)
	return err == nil && len(routes) > 0
}

// AdoptKept loads the BGP routes a previous run left in the kernel (our
// protocol, main table) into routes, the agent's learned routes. Call it
// once, before the first apply: otherwise that apply deletes them and
// cross-node traffic stops until the sessions are back.
func (r *Runner) AdoptKept(routes map[netip.Prefix]dataplane.RouteTarget) {
	krs, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Protocol: rtproto.BGP}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		slog.Warn("reading kept BGP routes", "err", err)
		return
	}
	kept := map[netip.Prefix]dataplane.RouteTarget{}
	for _, kr := range krs {
		if kr.Dst == nil || (kr.Table != 0 && kr.Table != 254) {
			continue
		}
		a, ok := netip.AddrFromSlice(kr.Dst.IP)
		if !ok {
			continue
		}
		ones, _ := kr.Dst.Mask.Size()
		var t dataplane.RouteTarget
		for _, gw := range append([]net.IP{kr.Gw}, multipathGws(kr)...) {
			if g, ok := netip.AddrFromSlice(gw); ok {
				t.Via = append(t.Via, g.Unmap())
			}
		}
		if len(t.Via) == 0 {
			continue
		}
		slices.SortFunc(t.Via, netip.Addr.Compare)
		kept[netip.PrefixFrom(a.Unmap(), ones).Masked()] = t
	}
	if len(kept) == 0 {
		return
	}
	r.kept, r.keptUntil = kept, time.Now().Add(keptHold)
	maps.Copy(routes, kept)
	slog.Info("holding BGP routes of the previous run until the peers are back", "routes", len(kept))
}

func multipathGws(kr netlink.Route) []net.IP {
	var out []net.IP
	for _, nh := range kr.MultiPath {
		out = append(out, nh.Gw)
	}
	return out
}

// converged: every peer is Established and has sent End-of-RIB, so the
// speaker's view replaces the routes kept from the previous run.
func (r *Runner) converged() bool {
	if r.speaker == nil {
		return false
	}
	for _, p := range r.speaker.PeerStatus() {
		if p.State != "Established" || !p.EndOfRIB {
			return false
		}
	}
	return true
}

// speakerGlobals are the settings a running speaker cannot change: a
// change needs a new speaker (reconfigure).
type speakerGlobals struct {
	routerID   netip.Addr
	asn        uint32
	listenPort int
}

func (r *Runner) globals(st *State) (speakerGlobals, error) {
	id, err := RouterID(r.cfg.RouterID, r.cfg.NodeName, r.self.Addr())
	return speakerGlobals{routerID: id, asn: st.asn(st.self()), listenPort: st.listenPort(r.cfg.Port)}, err
}

func globalsOf(c bgp.Config) speakerGlobals {
	return speakerGlobals{routerID: c.RouterID, asn: c.ASN, listenPort: c.ListenPort}
}

// ensureStarted starts the speaker once the node's AS is known.
func (r *Runner) ensureStarted(ctx context.Context, st *State) error {
	if r.speaker != nil || !r.self.IsValid() {
		return nil
	}
	g, err := r.globals(st)
	if err != nil {
		return err
	}
	cfg := bgp.Config{
		RouterID: g.routerID, ASN: g.asn, ListenPort: g.listenPort,
		ListenAddrs: []netip.Addr{r.self.Addr()}, HoldTime: 30 * time.Second, ConnectRetry: 5 * time.Second,
		GracefulRestart: true, RestartTime: 120 * time.Second, Restarting: !r.reconfigured && (len(r.kept) > 0 || keptBGPRoutes()),
		Logger: slog.Default().With("component", "bgp"), LogLevel: st.logLevel(),
	}
	if r.self6.IsValid() {
		cfg.NextHopV6 = r.self6.Addr()
		cfg.ListenAddrs = append(cfg.ListenAddrs, r.self6.Addr())
	}
	s := bgp.New(cfg)
	if err := s.Start(ctx); err != nil {
		return fmt.Errorf("starting BGP: %w", err)
	}
	r.speaker, r.routes = s, s.Routes()
	r.published.Store(s)
	slog.Info("BGP speaker started", "routerID", cfg.RouterID, "as", cfg.ASN, "port", cfg.ListenPort, "restarting", cfg.Restarting)
	return nil
}

// Sync hands the speaker the desired state (it diffs itself). A changed
// router ID, AS or listen port replaces the speaker first (reconfigure);
// routes are the learned routes, held meanwhile.
func (r *Runner) Sync(ctx context.Context, st *State, routes map[netip.Prefix]dataplane.RouteTarget) error {
	if err := r.reconfigure(ctx, st, routes); err != nil {
		return err
	}
	if err := r.ensureStarted(ctx, st); err != nil || r.speaker == nil {
		return err
	}
	r.speaker.SetLogLevel(st.logLevel())
	r.speaker.SetImportFilter(st.importFilter())
	// Advertisements before peers, so the first updates carry our blocks.
	errA := r.speaker.SetAdvertisements(st.Advertisements())
	peers := st.desiredPeers(r.cfg.Port)
	if r.speaker.Resets(peers) {
		r.hold(routes) // a re-created session withdraws its routes until it is back
	}
	errP := r.speaker.SetPeers(peers)
	return errors.Join(errA, errP)
}

// reconfigure replaces a running speaker whose router ID, AS or listen
// port no longer matches the datastore, as BIRD restarts its protocols on
// such a change, without a restart of the agent. The learned routes are
// held (kept, as across an agent restart) until the new speaker has
// converged or keptHold passes, so traffic keeps flowing while the sessions
// come back; the old speaker ends its sessions so that graceful-restart
// peers keep our routes meanwhile (bgp.Speaker.Shutdown).
func (r *Runner) reconfigure(ctx context.Context, st *State, routes map[netip.Prefix]dataplane.RouteTarget) error {
	if r.speaker == nil {
		return nil
	}
	want, err := r.globals(st)
	if err != nil {
		return err
	}
	have := globalsOf(r.speaker.Config())
	if want == have {
		return nil
	}
	slog.Info("BGP settings changed: replacing the speaker", "routerID", want.routerID, "as", want.asn,
		"port", want.listenPort, "wasRouterID", have.routerID, "wasAS", have.asn, "wasPort", have.listenPort)
	r.hold(routes)
	r.speaker.Shutdown(ctx)
	r.speaker, r.routes, r.reconfigured = nil, nil, true
	r.published.Store(nil)
	return nil
}

// hold keeps the current learned routes installed until the speaker has
// converged (ResyncLearned releases them) and makes withdrawals of them
// wait as well (ApplyEvents).
func (r *Runner) hold(routes map[netip.Prefix]dataplane.RouteTarget) {
	if r.kept == nil {
		r.kept = map[netip.Prefix]dataplane.RouteTarget{}
	}
	maps.Copy(r.kept, routes)
	r.keptUntil = time.Now().Add(keptHold)
}

// Holding says whether learned routes are held (after a restart or a
// reconfiguration).
func (r *Runner) Holding() bool { return r.kept != nil }

// ApplyEvents applies route events; a withdrawal of a held route leaves it
// in place until the hold ends.
func (r *Runner) ApplyEvents(routes map[netip.Prefix]dataplane.RouteTarget, evs []bgp.RouteEvent) {
	ApplyRouteEvents(routes, evs)
	for _, ev := range evs {
		if t, ok := r.kept[ev.Prefix]; ok && len(ev.NextHops) == 0 {
			routes[ev.Prefix] = t
		}
	}
}

// ApplyRouteEvents turns a batch of route events into route targets (nil: withdraw).
func ApplyRouteEvents(routes map[netip.Prefix]dataplane.RouteTarget, evs []bgp.RouteEvent) {
	for _, ev := range evs {
		if len(ev.NextHops) == 0 {
			delete(routes, ev.Prefix)
			continue
		}
		routes[ev.Prefix] = dataplane.RouteTarget{Via: ev.NextHops}
	}
}

// WithPriorities returns the learned routes with the metric
// BGPConfiguration gives each family (routePriority); routes is not
// changed.
func WithPriorities(routes map[netip.Prefix]dataplane.RouteTarget, st *State) map[netip.Prefix]dataplane.RouteTarget {
	m4, m6 := st.routePriority(false), st.routePriority(true)
	if m4 == 0 && m6 == 0 {
		return routes
	}
	out := make(map[netip.Prefix]dataplane.RouteTarget, len(routes))
	for p, t := range routes {
		t.Metric = m4
		if p.Addr().Is6() {
			t.Metric = m6
		}
		out[p] = t
	}
	return out
}

// ResyncLearned replaces the learned routes with the speaker's full view.
func (r *Runner) ResyncLearned(routes map[netip.Prefix]dataplane.RouteTarget) {
	if r.speaker == nil {
		return
	}
	all, err := r.speaker.Learned()
	if err != nil {
		slog.Warn("BGP resync skipped", "err", err)
		return
	}
	clear(routes)
	for p, nh := range all {
		routes[p] = dataplane.RouteTarget{Via: nh}
	}
	if r.kept == nil {
		return
	}
	if r.converged() || time.Now().After(r.keptUntil) {
		slog.Info("BGP converged after the restart: routes of the previous run released", "kept", len(r.kept))
		r.kept = nil
		return
	}
	for p, t := range r.kept {
		if _, ok := routes[p]; !ok {
			routes[p] = t
		}
	}
}

// Stop leaves gracefully: peers keep our routes for the restart time and we
// keep the routes we learned.
func (r *Runner) Stop() {
	if r.speaker != nil {
		r.speaker.Stop(true)
	}
}

// ServeStatus answers calicoctl node status on a unix socket.
func (r *Runner) ServeStatus(ctx context.Context, runDir string) error {
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(runDir, StatusSocketName)
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("status socket %s: %w", path, err)
	}
	go func() {
		<-ctx.Done()
		l.Close()
		os.Remove(path)
	}()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			st := NodeStatus{Running: true, BGPEnabled: r.cfg.Enabled}
			if sp := r.published.Load(); sp != nil {
				st.Peers = sp.PeerStatus()
			}
			_ = json.NewEncoder(c).Encode(st)
			c.Close()
		}
	}()
	return nil
}

// NodeStatus is what the status socket returns.
type NodeStatus struct {
	Running    bool             `json:"running"`
	BGPEnabled bool             `json:"bgpEnabled"`
	Peers      []bgp.PeerStatus `json:"peers"`
}

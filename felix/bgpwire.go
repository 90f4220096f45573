package felix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/bgp"
	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/felix/rtproto"
)

// StatusSocketName is the agent's status socket under the run directory;
// calicoctl node status reads it.
const StatusSocketName = "calico-node-status.sock"

// bgpRunner connects the embedded speaker to the agent loop: the loop
// hands it desired peers and advertisements; learned routes come back on a
// channel and only the loop turns them into kernel routes.
type bgpRunner struct {
	cfg     Config
	self    netip.Prefix
	self6   netip.Prefix
	speaker *bgp.Speaker
	routes  <-chan []bgp.RouteEvent
	// published is the speaker for the status socket's goroutine.
	published atomic.Pointer[bgp.Speaker]
}

// keptBGPRoutes reports whether the kernel still holds routes we learned
// before a restart (then peers may treat us as gracefully restarting).
func keptBGPRoutes() bool {
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Protocol: rtproto.BGP}, netlink.RT_FILTER_PROTOCOL)
	return err == nil && len(routes) > 0
}

// ensureStarted starts the speaker once the node's AS is known.
func (r *bgpRunner) ensureStarted(ctx context.Context, st *bgpState) error {
	if r.speaker != nil || !r.self.IsValid() {
		return nil
	}
	cfg := bgp.Config{
		RouterID: r.self.Addr(), ASN: st.asn(st.self()), ListenPort: st.listenPort(r.cfg.BGPPort),
		ListenAddrs: []netip.Addr{r.self.Addr()}, HoldTime: 30 * time.Second, ConnectRetry: 5 * time.Second,
		GracefulRestart: true, RestartTime: 120 * time.Second, Restarting: keptBGPRoutes(),
		Logger: slog.Default().With("component", "bgp"),
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

// sync hands the speaker the desired state (it diffs itself).
func (r *bgpRunner) sync(ctx context.Context, st *bgpState) error {
	if err := r.ensureStarted(ctx, st); err != nil || r.speaker == nil {
		return err
	}
	r.speaker.SetImportFilter(st.importFilter())
	// Advertisements before peers, so the first updates carry our blocks.
	errA := r.speaker.SetAdvertisements(st.advertisements())
	errP := r.speaker.SetPeers(st.desiredPeers(st.listenPort(r.cfg.BGPPort)))
	return errors.Join(errA, errP)
}

// learned turns a batch of route events into route targets (nil: withdraw).
func applyRouteEvents(routes map[netip.Prefix]dataplane.RouteTarget, evs []bgp.RouteEvent) {
	for _, ev := range evs {
		if len(ev.NextHops) == 0 {
			delete(routes, ev.Prefix)
			continue
		}
		routes[ev.Prefix] = dataplane.RouteTarget{Via: ev.NextHops}
	}
}

// resyncLearned replaces the learned routes with the speaker's full view.
func (r *bgpRunner) resyncLearned(routes map[netip.Prefix]dataplane.RouteTarget) {
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
}

// stop leaves gracefully: peers keep our routes for the restart time and we
// keep the routes we learned.
func (r *bgpRunner) stop() {
	if r.speaker != nil {
		r.speaker.Stop(true)
	}
}

// serveStatus answers calicoctl node status on a unix socket.
func (r *bgpRunner) serveStatus(ctx context.Context, runDir string) error {
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
			st := NodeStatus{Running: true, BGPEnabled: r.cfg.BGP}
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

// Package bgp runs an embedded GoBGP v3 speaker behind a small declarative
// API, in the style of metallb's internal/bgp: the caller hands over the whole
// desired set of advertisements and peers, the speaker diffs and applies it.
//
// The package never touches kernel state. Learned routes come out of Routes()
// as coalesced batches of RouteEvents; the agent's dataplane loop installs them
// (and resyncs periodically from Learned()). GoBGP's gRPC API stays off.
//
// Read GOBGP-NOTES (the team's GoBGP v3.37.0 notes) before changing anything:
// most choices below (passive side, short ConnectRetry, hold time, never
// blocking in the watch callback, DeletePath by path, no StopBgp on a graceful
// stop) come from traps listed there.
//
// ECMP: the speaker enables GoBGP's multipath, so a RouteEvent carries every
// next hop of the paths that tie with the best one (same local preference, AS
// path length, origin, MED and iBGP/eBGP kind). Learned() computes the same set
// from ListPath.
package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/server"
)

// Defaults; see GOBGP-NOTES traps 4, 8 and 9.
const (
	DefaultHoldTime      = 30 * time.Second
	DefaultKeepaliveTime = 10 * time.Second
	DefaultConnectRetry  = 5 * time.Second
	DefaultRestartTime   = 120 * time.Second
	// deferralTime bounds how long a restarting speaker waits for End-of-RIB
	// from its peers before it sends its own routes (GoBGP's default is 360 s).
	deferralTime = 30 * time.Second
)

// Config is the speaker's global configuration. It is fixed at New: a
// change of router ID, AS or listen port needs a new speaker (Shutdown the
// old one first, see Shutdown). The log level alone changes live
// (SetLogLevel).
type Config struct {
	RouterID      netip.Addr   // node IPv4 address; must be unique among peers
	ASN           uint32       // local AS (a peer may override it: Peer.LocalASN)
	ListenPort    int          // 0 means 179; negative: do not listen
	ListenAddrs   []netip.Addr // empty means all addresses
	HoldTime      time.Duration
	KeepaliveTime time.Duration
	ConnectRetry  time.Duration

	// GracefulRestart enables RFC 4724 (helper and restarting side) on every
	// peer. RestartTime is what we announce (default 120 s). Set Restarting
	// only when this process restarted and the kernel routes of the previous
	// run were kept: it applies to the peers of the first SetPeers call.
	GracefulRestart bool
	RestartTime     time.Duration
	Restarting      bool

	NextHopV6 netip.Addr // next hop of IPv6 advertisements (node IPv6); optional
	Logger    *slog.Logger
	// LogLevel is the least severe GoBGP message logged (zero: Info). It
	// is the speaker's own level, independent of the agent's: GoBGP's
	// messages at or above it are written whatever the logger's handler
	// would filter, so peering can be debugged without the agent's debug
	// output.
	LogLevel slog.Level
}

// Families selects the address families negotiated with a peer.
type Families uint8

const (
	IPv4Unicast Families = 1 << iota
	IPv6Unicast
)

// Peer is one BGP neighbour. Peers are keyed by Address; Peer is comparable so
// SetPeers can tell a changed peer from an unchanged one.
type Peer struct {
	Address netip.Addr
	Port    int    // 0 means 179
	ASN     uint32 // 0 means our own AS (iBGP)
	// LocalASN is the AS we present to this peer instead of Config.ASN
	// (BGPPeer localASNumber); 0 means Config.ASN.
	LocalASN uint32
	Password string // TCP MD5 (RFC 2385)
	// Passive: never dial, only accept. Make exactly one side of each mesh
	// pair passive (Calico: the higher address), see GOBGP-NOTES trap 4.
	Passive              bool
	RouteReflectorClient bool
	ClusterID            netip.Addr // route reflector cluster ID; default RouterID
	LocalAddress         netip.Addr // source address of the session; optional
	KeepaliveTime        time.Duration
	HoldTime             time.Duration
	// MaxRestartTime overrides Config.RestartTime for this peer (what we
	// announce, i.e. how long the peer keeps our routes while we restart).
	MaxRestartTime time.Duration
	Type           string // "node-to-node mesh", "global", "node specific": reported back in PeerStatus
	// Families to negotiate (zero means IPv4Unicast). List only families the
	// peer supports: with graceful restart a restarting speaker waits for an
	// End-of-RIB per family (GOBGP-NOTES trap 8).
	Families Families
}

// RouteEvent is the new state of one learned prefix: NextHops empty means the
// prefix is no longer learned (withdrawn, filtered, or our own path is best);
// several next hops mean ECMP.
type RouteEvent struct {
	Prefix   netip.Prefix
	NextHops []netip.Addr
}

// PeerStatus is one row of `calicoctl node status`.
type PeerStatus struct {
	Address netip.Addr
	Type    string
	State   string // Established, Active, Connect, Idle, OpenSent, OpenConfirm
	Since   time.Time
	Info    string
	// EndOfRIB: the peer sent End-of-RIB for every family it negotiated
	// graceful restart for, since the session came up (false without GR).
	EndOfRIB bool
}

// Speaker is an embedded BGP speaker. Create it with New, then Start.
type Speaker struct {
	cfg   Config
	log   *slog.Logger
	level *slog.LevelVar // GoBGP's log level (SetLogLevel)
	srv   *server.BgpServer

	mu        sync.Mutex // guards the fields below and serialises Set*
	started   bool
	stopped   bool
	peersSet  bool // SetPeers was called once (Config.Restarting applies to that call only)
	adverts   map[netip.Prefix]*api.Path
	peers     map[netip.Addr]Peer
	peerSince map[netip.Addr]time.Time

	filter atomic.Pointer[func(netip.Prefix) bool]

	evMu    sync.Mutex // guards pending; held only briefly in GoBGP's callback
	pending map[netip.Prefix][]netip.Addr
	wake    chan struct{}
	out     chan []RouteEvent
	cancel  context.CancelFunc
	done    chan struct{}
}

// New returns a speaker with defaults filled in. It does not start anything.
func New(cfg Config) *Speaker {
	if cfg.ListenPort == 0 {
		cfg.ListenPort = 179
	}
	if cfg.HoldTime == 0 {
		cfg.HoldTime = DefaultHoldTime
	}
	if cfg.KeepaliveTime == 0 {
		cfg.KeepaliveTime = min(DefaultKeepaliveTime, cfg.HoldTime/3)
	}
	if cfg.ConnectRetry == 0 {
		cfg.ConnectRetry = DefaultConnectRetry
	}
	if cfg.RestartTime == 0 {
		cfg.RestartTime = DefaultRestartTime
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := cfg.Logger.With("component", "bgp", "routerID", cfg.RouterID.String())
	level := new(slog.LevelVar)
	level.Set(cfg.LogLevel)
	return &Speaker{
		cfg:       cfg,
		log:       l,
		level:     level,
		adverts:   map[netip.Prefix]*api.Path{},
		peers:     map[netip.Addr]Peer{},
		peerSince: map[netip.Addr]time.Time{},
		pending:   map[netip.Prefix][]netip.Addr{},
		wake:      make(chan struct{}, 1),
		out:       make(chan []RouteEvent),
		done:      make(chan struct{}),
	}
}

// Start starts GoBGP (no gRPC API) and registers the single watch, before any
// peer exists. ctx bounds the start-up calls only; the speaker runs until Stop.
func (s *Speaker) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("bgp: speaker already started")
	}
	if !s.cfg.RouterID.Is4() {
		return fmt.Errorf("bgp: router ID %v is not an IPv4 address", s.cfg.RouterID)
	}
	if s.cfg.ASN == 0 {
		return errors.New("bgp: AS number 0")
	}
	if s.cfg.HoldTime > 0 && s.cfg.HoldTime < 3*time.Second {
		return fmt.Errorf("bgp: hold time %v below 3s", s.cfg.HoldTime)
	}
	s.srv = server.NewBgpServer(server.LoggerOption(newGoBGPLogger(s.log, s.level)))
	go s.srv.Serve()

	g := &api.Global{
		Asn:              s.cfg.ASN,
		RouterId:         s.cfg.RouterID.String(),
		ListenPort:       int32(s.cfg.ListenPort),
		UseMultiplePaths: true, // ECMP; GoBGP keeps this process-wide
	}
	for _, a := range s.cfg.ListenAddrs {
		g.ListenAddresses = append(g.ListenAddresses, a.String())
	}
	if err := s.srv.StartBgp(ctx, &api.StartBgpRequest{Global: g}); err != nil {
		return fmt.Errorf("bgp: starting GoBGP: %w", err)
	}

	wctx, cancel := context.WithCancel(context.Background())
	req := &api.WatchEventRequest{
		Peer: &api.WatchEventRequest_Peer{},
		Table: &api.WatchEventRequest_Table{Filters: []*api.WatchEventRequest_Table_Filter{
			{Type: api.WatchEventRequest_Table_Filter_BEST, Init: true},
		}},
	}
	if err := s.srv.WatchEvent(wctx, req, s.onEvent); err != nil {
		cancel()
		_ = s.srv.StopBgp(context.Background(), &api.StopBgpRequest{})
		return fmt.Errorf("bgp: watching GoBGP events: %w", err)
	}
	s.cancel = cancel
	go s.drain(wctx)
	s.started = true
	s.log.Info("BGP speaker started", "asn", s.cfg.ASN, "port", s.cfg.ListenPort,
		"gracefulRestart", s.cfg.GracefulRestart, "restarting", s.cfg.Restarting)
	return nil
}

// Stop stops the speaker and closes the Routes channel. graceful=true is for a
// process that is about to exit and restart: it does not call StopBgp (which
// sends a Cease and makes peers drop our routes at once); the sessions die with
// the process and peers keep our routes for the restart time. Call it only
// right before exiting. graceful=false sends Cease to every peer.
func (s *Speaker) Stop(graceful bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.stopped {
		return
	}
	s.stopped = true
	if !graceful {
		if err := s.srv.StopBgp(context.Background(), &api.StopBgpRequest{}); err != nil {
			s.log.Error("stopping GoBGP", "err", err)
		}
	}
	s.cancel()
	<-s.done
	s.log.Info("BGP speaker stopped", "graceful", graceful)
}

// Shutdown ends the speaker for a reconfiguration (a new router ID, AS or
// listen port needs a new speaker): every session is first ended with an
// administrative reset, which a peer that negotiated RFC 8538 (GoBGP with
// this speaker's settings does) treats as a graceful restart, keeping our
// routes until the new session's End-of-RIB; then GoBGP stops (no
// Established session is left to send its hard-reset Cease to) and frees
// the listen port. The caller keeps the routes it installed (the agent holds
// them until the new speaker has converged). Routes is closed. GoBGP v3
// cannot end its Serve goroutine: each Shutdown leaves that goroutine and
// the stopped server's tables behind (a reconfiguration is an operator's
// rare act; a move to GoBGP v4 can drop this).
func (s *Speaker) Shutdown(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.stopped {
		return
	}
	s.stopped = true
	s.endSessions(ctx, slices.Collect(maps.Keys(s.peers)))
	if err := s.srv.StopBgp(ctx, &api.StopBgpRequest{}); err != nil {
		s.log.Error("stopping GoBGP", "err", err)
	}
	s.cancel()
	<-s.done
	s.log.Info("BGP speaker shut down for a reconfiguration")
}

// endSessions ends the sessions with addrs by an administrative reset (a
// graceful restart for RFC 8538 peers), so that deleting the peers
// afterwards sends no hard-reset Cease. It waits, polling, until none of
// them is Established (the resets are asynchronous), for at most two
// seconds or until ctx ends.
func (s *Speaker) endSessions(ctx context.Context, addrs []netip.Addr) {
	if len(addrs) == 0 {
		return
	}
	for _, addr := range addrs {
		if err := s.srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: addr.String(), Communication: "reconfiguring"}); err != nil {
			s.log.Warn("resetting BGP peer before reconfiguring it", "peer", addr, "err", err)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		up := false
		_ = s.srv.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
			a, err := netip.ParseAddr(p.GetConf().GetNeighborAddress())
			up = up || err == nil && slices.Contains(addrs, a.Unmap()) && p.GetState().GetSessionState() == api.PeerState_ESTABLISHED
		})
		if !up {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Config is the configuration the speaker runs with (defaults filled in).
func (s *Speaker) Config() Config { return s.cfg }

// LogLevel is GoBGP's log level now.
func (s *Speaker) LogLevel() slog.Level { return s.level.Level() }

// SetLogLevel changes GoBGP's log level live.
func (s *Speaker) SetLogLevel(l slog.Level) {
	if s.level.Level() != l {
		s.level.Set(l)
		s.log.Info("BGP log level changed", "level", l)
	}
}

// Routes returns the channel of learned-route batches. Each event is the full
// current next-hop set of its prefix; batches are coalesced (only the latest
// state of a prefix is delivered) and never repeat an unchanged state. The
// channel is closed by Stop.
func (s *Speaker) Routes() <-chan []RouteEvent { return s.out }

// SetImportFilter sets which learned prefixes are accepted (nil: all). It is
// evaluated in GoBGP's event callback, so it must be fast and never block, and
// by Learned; a rejected prefix is reported as withdrawn. A changed filter is
// not replayed: resync from Learned().
func (s *Speaker) SetImportFilter(accept func(netip.Prefix) bool) {
	if accept == nil {
		s.filter.Store(nil)
		return
	}
	s.filter.Store(&accept)
}

func (s *Speaker) accepts(p netip.Prefix) bool {
	f := s.filter.Load()
	return f == nil || (*f)(p)
}

func (s *Speaker) running() error {
	if !s.started {
		return errors.New("bgp: speaker not started")
	}
	if s.stopped {
		return errors.New("bgp: speaker stopped")
	}
	return nil
}

// seconds converts a timer to GoBGP's whole seconds (at least 1 when set).
func seconds(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return max(1, uint64((d+time.Second/2)/time.Second))
}

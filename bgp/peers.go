package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	api "github.com/osrg/gobgp/v3/api"
)

// SetPeers sets the full set of peers; nil and empty both mean "no peers".
// New peers are added, changed ones re-created (GoBGP's UpdatePeer ignores
// some fields, e.g. route reflector settings, and resets the session for the
// rest anyway), then peers no longer wanted are deleted, which withdraws their
// routes. A change of Type only is applied without touching the session. A
// changed peer's session is first ended gracefully (endSessions), so the peer
// keeps our routes until the new session's End-of-RIB; its routes here are
// withdrawn (see Resets).
// Failures are joined; the peers that failed are retried by the next call.
func (s *Speaker) SetPeers(peers []Peer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.running(); err != nil {
		return err
	}
	restarting := s.cfg.GracefulRestart && s.cfg.Restarting && !s.peersSet
	s.peersSet = true

	var errs []error
	want := make(map[netip.Addr]Peer, len(peers))
	for _, p := range peers {
		p.Address = p.Address.Unmap()
		switch {
		case !p.Address.IsValid():
			errs = append(errs, errors.New("bgp: peer without address"))
			continue
		}
		if _, dup := want[p.Address]; dup {
			errs = append(errs, fmt.Errorf("bgp: peer %v listed twice", p.Address))
			continue
		}
		want[p.Address] = p
	}
	ctx := context.Background()
	var renew []netip.Addr
	for addr, p := range want {
		if old, had := s.peers[addr]; had && !sessionEqual(old, p) {
			renew = append(renew, addr)
		}
	}
	s.endSessions(ctx, renew)
	for addr, p := range want {
		old, had := s.peers[addr]
		if had && sessionEqual(old, p) {
			s.peers[addr] = p // Type only
			continue
		}
		if had {
			if err := s.deletePeer(ctx, addr); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := s.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: s.apiPeer(p, restarting)}); err != nil {
			errs = append(errs, fmt.Errorf("bgp: adding peer %v: %w", addr, err))
			continue
		}
		s.peers[addr] = p
		s.peerSince[addr] = time.Now()
		s.log.Info("BGP peer configured", "peer", addr, "asn", p.ASN, "type", p.Type, "passive", p.Passive)
	}
	for addr := range s.peers {
		if _, ok := want[addr]; ok {
			continue
		}
		if err := s.deletePeer(ctx, addr); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Resets says whether SetPeers(peers) would re-create an existing session
// (and withdraw what that peer sent us until it is back).
func (s *Speaker) Resets(peers []Peer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range peers {
		p.Address = p.Address.Unmap()
		if old, had := s.peers[p.Address]; had && !sessionEqual(old, p) {
			return true
		}
	}
	return false
}

func (s *Speaker) deletePeer(ctx context.Context, addr netip.Addr) error {
	if err := s.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}); err != nil {
		return fmt.Errorf("bgp: deleting peer %v: %w", addr, err)
	}
	delete(s.peers, addr)
	delete(s.peerSince, addr)
	s.log.Info("BGP peer removed", "peer", addr)
	return nil
}

// sessionEqual reports whether two peer configs give the same session.
func sessionEqual(a, b Peer) bool {
	a.Type, b.Type = "", ""
	return a == b
}

// apiPeer translates a Peer into GoBGP's configuration.
func (s *Speaker) apiPeer(p Peer, restarting bool) *api.Peer {
	port, asn, hold, keepalive := p.Port, p.ASN, p.HoldTime, p.KeepaliveTime
	if port == 0 {
		port = 179
	}
	if asn == 0 {
		asn = s.cfg.ASN
	}
	if hold == 0 {
		hold = s.cfg.HoldTime
	}
	if keepalive == 0 {
		keepalive = min(s.cfg.KeepaliveTime, hold/3)
	}
	ap := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: p.Address.String(),
			PeerAsn:         asn,
			LocalAsn:        p.LocalASN,
			AuthPassword:    p.Password,
		},
		Transport: &api.Transport{PassiveMode: p.Passive, RemotePort: uint32(port)},
		Timers: &api.Timers{Config: &api.TimersConfig{
			ConnectRetry:      seconds(s.cfg.ConnectRetry),
			HoldTime:          seconds(hold),
			KeepaliveInterval: seconds(keepalive),
		}},
	}
	if p.LocalAddress.IsValid() {
		ap.Transport.LocalAddress = p.LocalAddress.Unmap().String()
	}
	if p.RouteReflectorClient {
		cluster := p.ClusterID
		if !cluster.IsValid() {
			cluster = s.cfg.RouterID
		}
		ap.RouteReflector = &api.RouteReflector{RouteReflectorClient: true, RouteReflectorClusterId: cluster.String()}
	}
	fams := p.Families
	if fams == 0 {
		fams = IPv4Unicast
	}
	for _, f := range []struct {
		bit Families
		afi api.Family_Afi
	}{{IPv4Unicast, api.Family_AFI_IP}, {IPv6Unicast, api.Family_AFI_IP6}} {
		if fams&f.bit == 0 {
			continue
		}
		// Explicit AfiSafis: without them GoBGP negotiates only the
		// session's own family.
		ap.AfiSafis = append(ap.AfiSafis, &api.AfiSafi{
			Config:            &api.AfiSafiConfig{Family: &api.Family{Afi: f.afi, Safi: api.Family_SAFI_UNICAST}, Enabled: true},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: s.cfg.GracefulRestart}},
		})
	}
	if s.cfg.GracefulRestart {
		rt := s.cfg.RestartTime
		if p.MaxRestartTime > 0 {
			rt = p.MaxRestartTime
		}
		ap.GracefulRestart = &api.GracefulRestart{
			Enabled:         true,
			RestartTime:     uint32(min(seconds(rt), 4095)), // 12-bit field
			DeferralTime:    uint32(seconds(deferralTime)),
			LocalRestarting: restarting,
			// RFC 8538: a Cease other than a hard reset (Shutdown's
			// administrative reset) starts graceful restart too.
			NotificationEnabled: true,
		}
	}
	return ap
}

// PeerStatus reports every configured peer, sorted by address.
func (s *Speaker) PeerStatus() []PeerStatus {
	s.mu.Lock()
	if s.running() != nil {
		s.mu.Unlock()
		return nil
	}
	peers := make(map[netip.Addr]Peer, len(s.peers))
	since := make(map[netip.Addr]time.Time, len(s.peerSince))
	for a, p := range s.peers {
		peers[a], since[a] = p, s.peerSince[a]
	}
	s.mu.Unlock()

	var out []PeerStatus
	_ = s.srv.ListPeer(context.Background(), &api.ListPeerRequest{}, func(ap *api.Peer) {
		addr, err := netip.ParseAddr(ap.GetConf().GetNeighborAddress())
		if err != nil {
			return
		}
		addr = addr.Unmap()
		p, ok := peers[addr]
		if !ok {
			return
		}
		st := PeerStatus{Address: addr, Type: p.Type, State: stateName(ap.GetState().GetSessionState()), Since: since[addr]}
		established := ap.GetState().GetSessionState() == api.PeerState_ESTABLISHED
		timers := ap.GetTimers().GetState()
		switch {
		case established && timers.GetUptime() != nil:
			st.Since = timers.GetUptime().AsTime()
		case !established && timers.GetDowntime() != nil:
			st.Since = timers.GetDowntime().AsTime()
		}
		gr := ap.GetGracefulRestart()
		switch {
		case established:
			st.Info = "Established"
			st.EndOfRIB = endOfRIB(ap)
		case gr.GetPeerRestarting():
			st.Info = "Graceful restart: keeping the peer's routes"
		case p.Passive:
			st.Info = st.State + " (passive: waiting for the peer)"
		default:
			st.Info = st.State
		}
		out = append(out, st)
	})
	slices.SortFunc(out, func(a, b PeerStatus) int { return a.Address.Compare(b.Address) })
	return out
}

// endOfRIB: End-of-RIB seen for every family the peer announced graceful
// restart for (GoBGP clears the flags when the session goes down).
func endOfRIB(ap *api.Peer) bool {
	seen := false
	for _, af := range ap.GetAfiSafis() {
		st := af.GetMpGracefulRestart().GetState()
		if st.GetEnabled() && st.GetReceived() {
			if !st.GetEndOfRibReceived() {
				return false
			}
			seen = true
		}
	}
	return seen
}

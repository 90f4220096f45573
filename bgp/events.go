package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
)

// onEvent is GoBGP's watch callback. It must never block (GOBGP-NOTES trap 5):
// it decodes, records the new state of each prefix in s.pending under a short
// lock and pokes the drain goroutine.
func (s *Speaker) onEvent(r *api.WatchEventResponse) {
	switch ev := r.Event.(type) {
	case *api.WatchEventResponse_Table:
		s.onPaths(ev.Table.GetPaths())
	case *api.WatchEventResponse_Peer:
		// GoBGP itself logs sessions going down, with the reason.
		st := ev.Peer.GetPeer().GetState()
		if ev.Peer.GetType() == api.WatchEventResponse_PeerEvent_STATE && st != nil {
			level := slog.LevelDebug
			if st.GetSessionState() == api.PeerState_ESTABLISHED {
				level = slog.LevelInfo
			}
			s.log.Log(context.Background(), level, "BGP peer state", "peer", st.GetNeighborAddress(),
				"state", stateName(st.GetSessionState()))
		}
	}
}

// onPaths handles one best-path event. With multipath on, GoBGP sends for each
// changed prefix either its whole new multipath set or one withdrawn path, all
// in a single callback (batch size 0), so grouping by prefix gives the full
// next-hop set.
func (s *Speaker) onPaths(paths []*api.Path) {
	if len(paths) == 0 {
		return
	}
	type state struct {
		local bool
		hops  []netip.Addr
	}
	changed := map[netip.Prefix]*state{}
	for _, p := range paths {
		if p.GetNlri() == nil { // End-of-RIB marker
			continue
		}
		d, err := decodePath(p)
		if err != nil {
			s.log.Warn("undecodable BGP path", "err", err)
			continue
		}
		st := changed[d.prefix]
		if st == nil {
			st = &state{}
			changed[d.prefix] = st
		}
		switch {
		case p.GetIsWithdraw():
		case !d.neighbor.IsValid():
			// Our own path (empty neighbour address, trap 6): skip it, and
			// if it is the best one the learned route must go.
			st.local = true
		case d.nextHop.IsValid() && !slices.Contains(st.hops, d.nextHop):
			st.hops = append(st.hops, d.nextHop)
		}
	}
	next := make(map[netip.Prefix][]netip.Addr, len(changed))
	for pfx, st := range changed {
		var hops []netip.Addr
		if !st.local && s.accepts(pfx) {
			hops = st.hops
			slices.SortFunc(hops, netip.Addr.Compare)
		}
		next[pfx] = hops
	}
	s.evMu.Lock()
	maps.Copy(s.pending, next)
	s.evMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// drain turns pending states into batches on s.out, skipping states equal to
// what was last delivered. Only this goroutine may block on the consumer.
func (s *Speaker) drain(ctx context.Context) {
	defer close(s.done)
	defer close(s.out)
	delivered := map[netip.Prefix][]netip.Addr{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		s.evMu.Lock()
		pending := s.pending
		s.pending = map[netip.Prefix][]netip.Addr{}
		s.evMu.Unlock()

		var batch []RouteEvent
		for pfx, hops := range pending {
			old, had := delivered[pfx]
			if len(hops) == 0 {
				if !had {
					continue
				}
				delete(delivered, pfx)
			} else {
				if had && slices.Equal(old, hops) {
					continue
				}
				delivered[pfx] = hops
			}
			batch = append(batch, RouteEvent{Prefix: pfx, NextHops: hops})
		}
		if len(batch) == 0 {
			continue
		}
		slices.SortFunc(batch, func(a, b RouteEvent) int { return comparePrefix(a.Prefix, b.Prefix) })
		select {
		case s.out <- batch:
		case <-ctx.Done():
			return
		}
	}
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// decoded is what we need from a GoBGP path.
type decoded struct {
	prefix   netip.Prefix
	nextHop  netip.Addr
	neighbor netip.Addr // invalid for local paths
	rank     rank
}

// rank holds the attributes GoBGP's multipath comparison looks at
// (table.Path.Compare): paths with equal rank share the prefix (ECMP).
type rank struct {
	local, ibgp bool
	localPref   uint32
	asPathLen   int
	origin      uint8
	med         uint32
}

func decodePath(p *api.Path) (decoded, error) {
	var d decoded
	nlri, err := apiutil.GetNativeNlri(p)
	if err != nil {
		return d, fmt.Errorf("decoding NLRI: %w", err)
	}
	if d.prefix, err = netip.ParsePrefix(nlri.String()); err != nil {
		return d, fmt.Errorf("NLRI %q: %w", nlri.String(), err)
	}
	d.prefix = d.prefix.Masked()
	if a, err := netip.ParseAddr(p.GetNeighborIp()); err == nil && !a.IsUnspecified() {
		d.neighbor = a.Unmap()
	}
	attrs, err := apiutil.GetNativePathAttributes(p)
	if err != nil {
		return d, fmt.Errorf("decoding attributes of %v: %w", d.prefix, err)
	}
	d.rank = rank{local: !d.neighbor.IsValid(), localPref: 100}
	for _, a := range attrs {
		switch a := a.(type) {
		case *bgp.PathAttributeNextHop:
			d.nextHop, _ = netip.AddrFromSlice(a.Value)
		case *bgp.PathAttributeMpReachNLRI:
			d.nextHop, _ = netip.AddrFromSlice(a.Nexthop)
		case *bgp.PathAttributeLocalPref:
			d.rank.localPref = a.Value
		case *bgp.PathAttributeMultiExitDisc:
			d.rank.med = a.Value
		case *bgp.PathAttributeOrigin:
			d.rank.origin = a.Value
		case *bgp.PathAttributeAsPath:
			for _, seg := range a.Value {
				d.rank.asPathLen += seg.ASLen()
			}
		}
	}
	d.nextHop = d.nextHop.Unmap()
	return d, nil
}

func stateName(st api.PeerState_SessionState) string {
	switch st {
	case api.PeerState_IDLE:
		return "Idle"
	case api.PeerState_CONNECT:
		return "Connect"
	case api.PeerState_ACTIVE:
		return "Active"
	case api.PeerState_OPENSENT:
		return "OpenSent"
	case api.PeerState_OPENCONFIRM:
		return "OpenConfirm"
	case api.PeerState_ESTABLISHED:
		return "Established"
	}
	return "Unknown"
}

package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
)

// SetAdvertisements sets the full set of prefixes we originate; nil and empty
// both mean "advertise nothing". New prefixes are added before removed ones
// are withdrawn. IPv4 prefixes carry RouterID as next hop, IPv6 prefixes
// NextHopV6 (in MP_REACH_NLRI). Prefixes that fail are reported in the joined
// error and retried by the next call; the rest is applied.
//
// Call it before the first SetPeers so the first updates (and, with graceful
// restart, the End-of-RIB) already carry our prefixes (GOBGP-NOTES trap 8).
func (s *Speaker) SetAdvertisements(prefixes []netip.Prefix) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.running(); err != nil {
		return err
	}
	var errs []error
	want := make(map[netip.Prefix]bool, len(prefixes))
	for _, p := range prefixes {
		q, ok := normPrefix(p)
		if !ok {
			errs = append(errs, fmt.Errorf("bgp: invalid prefix %v", p))
			continue
		}
		want[q] = true
	}
	ctx := context.Background()
	for p := range want {
		if s.adverts[p] != nil {
			continue
		}
		path, err := s.originPath(p)
		if err == nil {
			_, err = s.srv.AddPath(ctx, &api.AddPathRequest{TableType: api.TableType_GLOBAL, Path: path})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("bgp: advertising %v: %w", p, err))
			continue
		}
		s.adverts[p] = path
	}
	for p, path := range s.adverts {
		if want[p] {
			continue
		}
		// By path, not by UUID: the UUID lookup scans the RIB (trap in notes).
		err := s.srv.DeletePath(ctx, &api.DeletePathRequest{TableType: api.TableType_GLOBAL, Family: path.Family, Path: path})
		if err != nil {
			errs = append(errs, fmt.Errorf("bgp: withdrawing %v: %w", p, err))
			continue
		}
		delete(s.adverts, p)
	}
	return errors.Join(errs...)
}

// normPrefix masks p and turns an IPv4-mapped IPv6 prefix into IPv4.
func normPrefix(p netip.Prefix) (netip.Prefix, bool) {
	if !p.IsValid() {
		return p, false
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return p, false
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), true
}

// originPath builds the GoBGP path for one of our prefixes.
func (s *Speaker) originPath(p netip.Prefix) (*api.Path, error) {
	origin := bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP)
	if p.Addr().Is4() {
		nlri := bgp.NewIPAddrPrefix(uint8(p.Bits()), p.Addr().String())
		attrs := []bgp.PathAttributeInterface{origin, bgp.NewPathAttributeNextHop(s.cfg.RouterID.String())}
		return apiutil.NewPath(nlri, false, attrs, time.Now())
	}
	if !s.cfg.NextHopV6.Is6() || s.cfg.NextHopV6.Is4In6() {
		return nil, errors.New("IPv6 prefix but no IPv6 next hop configured (Config.NextHopV6)")
	}
	nlri := bgp.NewIPv6AddrPrefix(uint8(p.Bits()), p.Addr().String())
	mp := bgp.NewPathAttributeMpReachNLRI(s.cfg.NextHopV6.String(), []bgp.AddrPrefixInterface{nlri})
	return apiutil.NewPath(nlri, false, []bgp.PathAttributeInterface{origin, mp}, time.Now())
}

// Learned returns the full current set of learned, accepted prefixes with their
// multipath next hops, read from GoBGP's RIB (ListPath), for a periodic FIB
// resync by the caller. Prefixes where our own path is best are left out.
func (s *Speaker) Learned() (map[netip.Prefix][]netip.Addr, error) {
	s.mu.Lock()
	err := s.running()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	out := map[netip.Prefix][]netip.Addr{}
	var errs []error
	for _, afi := range []api.Family_Afi{api.Family_AFI_IP, api.Family_AFI_IP6} {
		req := &api.ListPathRequest{
			TableType: api.TableType_GLOBAL,
			Family:    &api.Family{Afi: afi, Safi: api.Family_SAFI_UNICAST},
		}
		err := s.srv.ListPath(context.Background(), req, func(d *api.Destination) {
			pfx, hops, err := s.multipath(d.GetPaths())
			if err != nil {
				errs = append(errs, err)
			} else if len(hops) > 0 && s.accepts(pfx) {
				out[pfx] = hops
			}
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("bgp: listing %v paths: %w", afi, err))
		}
	}
	return out, errors.Join(errs...)
}

// multipath picks the next hops of the paths that tie with the best one;
// GoBGP lists a destination's paths best first.
func (s *Speaker) multipath(paths []*api.Path) (netip.Prefix, []netip.Addr, error) {
	var best rank
	var pfx netip.Prefix
	var hops []netip.Addr
	for i, p := range paths {
		d, err := decodePath(p)
		if err != nil {
			return pfx, nil, err
		}
		d.rank.ibgp = p.GetSourceAsn() == s.cfg.ASN
		if i == 0 {
			pfx, best = d.prefix, d.rank
			if best.local {
				return pfx, nil, nil
			}
		}
		if p.GetIsNexthopInvalid() || d.rank != best || !d.nextHop.IsValid() {
			continue
		}
		if !slices.Contains(hops, d.nextHop) {
			hops = append(hops, d.nextHop)
		}
	}
	slices.SortFunc(hops, netip.Addr.Compare)
	return pfx, hops, nil
}

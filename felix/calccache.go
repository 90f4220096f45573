package felix

import "github.com/calico-aio/calico-aio/felix/calc"

// calcCache keeps the calculation's last output, so that an apply asked
// for only by a kernel refresh, a retry or a host interface event reuses
// it instead of rendering every chain again (issue #25: an idle agent's
// periodic refreshes cost a whole render each, 18k rules at 250 endpoints
// and 1,000 policies). Every input of the calculation marks it stale: a
// datastore update or the effective settings folded in, host interfaces
// handed to it, kube-proxy's IPVS mode, the IPv6 choice. An IPAM block
// update marks only the blackholes stale: blocks feed nothing else, and
// every pod ADD and DEL writes one, so it would otherwise cost a whole
// render of its own besides the endpoint's.
type calcCache struct {
	stale, blocksStale, have, ipv6 bool
	d                              calc.Desired
}

// invalidate records that an input of the calculation changed.
func (c *calcCache) invalidate() { c.stale = true }

// invalidateBlocks records that IPAM blocks changed, and nothing else.
func (c *calcCache) invalidateBlocks() { c.blocksStale = true }

// desired returns s.Desired(ipv6), computed again only when an input
// changed since the last time (only its blackholes when only blocks did).
// The result is shared: callers must not change it.
func (c *calcCache) desired(s *calc.State, ipv6 bool) calc.Desired {
	switch {
	case c.stale || !c.have || c.ipv6 != ipv6:
		c.d, c.ipv6, c.have, c.stale = s.Desired(ipv6), ipv6, true, false
	case c.blocksStale:
		c.d.Blackholes = s.Blackholes(ipv6) // a new slice: earlier results keep theirs
	}
	c.blocksStale = false
	return c.d
}

package dataplane

import "github.com/calico-aio/calico-aio/internal/rtproto"

// RouteSync is FelixConfiguration routeSyncDisabled for the route
// manager. Calico's Felix then performs no operation on its route tables
// (policy-only mode): here the routes Felix programs in Calico (to local
// workloads, VXLAN and CrossSubnet routes to other nodes, with our
// workload protocol) are neither added, changed nor removed, while the
// routes BIRD programs in Calico (BGP-learned and IP-in-IP routes, with
// our BGP protocol, and the blackholes of this node's blocks when BGP
// runs) are still kept.
type RouteSync struct {
	Disabled bool
	// BGPBlackholes: BGP runs, so the blocks' blackholes stand for
	// BIRD's and are still kept with Disabled.
	BGPBlackholes bool
}

// frozen says whether a route with protocol proto is left as it is.
func (s RouteSync) frozen(proto int, blackhole bool) bool {
	return s.Disabled && proto != rtproto.BGP && !(blackhole && s.BGPBlackholes)
}

// setSync records s; a change marks the manager dirty, so turning it
// off programs what was left undone.
func (m *routeManager) setSync(s RouteSync) {
	if m.sync != s {
		m.sync, m.dirty = s, true
	}
}

package calc

import (
	"net/netip"
	"sort"
	"strings"

	"github.com/calico-aio/calico-aio/store/api"
)

// FelixConfiguration routeSource (Calico's default CalicoIPAM): where the
// routes to other nodes' workloads come from. CalicoIPAM routes each
// node's IPAM blocks (and borrowed addresses); WorkloadIPs routes each
// address of every other node's workload endpoints instead, so addresses
// from another IPAM are reached too. It shapes the VXLAN routes (the only
// routes this agent computes to remote workloads; BGP advertises blocks
// either way).

// wepAddrs is what routing needs of a workload endpoint.
type wepAddrs struct {
	node  string
	addrs []netip.Prefix
}

// applyWorkloadEndpoint records an endpoint's node and addresses; the
// cached overlay is dropped only when routes come from them.
func (o *Overlay) applyWorkloadEndpoint(u Update) {
	var w *api.WorkloadEndpoint
	if !u.Deleted {
		w, _ = u.Resource.(*api.WorkloadEndpoint)
	}
	_, had := o.weps[u.Key]
	if w == nil {
		delete(o.weps, u.Key)
	} else {
		e := wepAddrs{node: w.Spec.Node}
		for _, n := range w.Spec.IPNetworks {
			if p, err := api.ParseCIDROrIP(n); err == nil {
				e.addrs = append(e.addrs, p)
			}
		}
		o.weps[u.Key] = e
	}
	if o.workloadIPs() && (had || w != nil) {
		o.last = nil
	}
}

// workloadIPs reports whether routeSource is WorkloadIPs ("default"
// overlaid by "node.<name>").
func (o *Overlay) workloadIPs() bool {
	src := ""
	for _, name := range []string{"default", "node." + o.node} {
		if f, ok := o.felixCfgs[name]; ok && f.Spec.RouteSource != "" {
			src = f.Spec.RouteSource
		}
	}
	return strings.EqualFold(src, "WorkloadIPs")
}

// workloadRoutes routes each address (of the family, in an encapsulating
// pool) of every other node's workload endpoints.
func (o *Overlay) workloadRoutes(v6 bool, pools []routedPool, route func(netip.Prefix, string, routedPool)) {
	keys := make([]string, 0, len(o.weps))
	for k := range o.weps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e := o.weps[k]
		for _, p := range e.addrs {
			if p.Addr().Is6() != v6 {
				continue
			}
			if pool, ok := poolOf(pools, p); ok {
				route(p, e.node, pool)
			}
		}
	}
}

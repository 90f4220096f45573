package metrics

import (
	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/store/api"
)

// clusterCounts follows the datastore stream for Calico's cluster-wide
// counts: nodes, workload endpoints and host endpoints (each with the node
// it is on, so this host's host endpoints can be counted too), policies,
// profiles and tiers. Pure; the loop feeds it.
type clusterCounts struct {
	node      string
	hosts     map[string]bool
	workloads map[string]string // key -> node
	hostEPs   map[string]string // key -> node
	policies  map[string]bool   // networkpolicies and globalnetworkpolicies
	profiles  map[string]bool
	tiers     map[string]bool
}

func newClusterCounts(node string) *clusterCounts {
	return &clusterCounts{node: node, hosts: map[string]bool{}, workloads: map[string]string{}, hostEPs: map[string]string{},
		policies: map[string]bool{}, profiles: map[string]bool{}, tiers: map[string]bool{}}
}

func (c *clusterCounts) observe(u calc.Update) {
	set := func(m map[string]bool) {
		if u.Deleted {
			delete(m, u.Key)
		} else {
			m[u.Key] = true
		}
	}
	switch u.Kind {
	case "nodes":
		set(c.hosts)
	case "networkpolicies", "globalnetworkpolicies":
		set(c.policies)
	case "profiles":
		set(c.profiles)
	case "tiers":
		set(c.tiers)
	case "workloadendpoints":
		delete(c.workloads, u.Key)
		if w, ok := u.Resource.(*api.WorkloadEndpoint); ok && !u.Deleted {
			c.workloads[u.Key] = w.Spec.Node
		}
	case "hostendpoints":
		delete(c.hostEPs, u.Key)
		if h, ok := u.Resource.(*api.HostEndpoint); ok && !u.Deleted {
			c.hostEPs[u.Key] = h.Spec.Node
		}
	}
}

// localHostEndpoints counts the host endpoints on this node.
func (c *clusterCounts) localHostEndpoints() int {
	n := 0
	for _, node := range c.hostEPs {
		if node == c.node {
			n++
		}
	}
	return n
}

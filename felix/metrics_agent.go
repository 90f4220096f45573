package felix

import (
	"net/netip"
	"time"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/dataplane"
)

// observeUpdate counts one datastore update (the end-of-list marker is
// not one) and follows it for the cluster-wide counts.
func (m *metrics) observeUpdate(u calc.Update) {
	m.unsupported.observe(u)
	if u.Kind == "" {
		return
	}
	m.updates.WithLabelValues(u.Kind).Inc()
	m.cluster.observe(u)
}

// recordMetrics sets the gauges after an apply: what the calculation
// wanted (d), what was handed to the dataplane (des), how long it took and
// whether it failed. Runs on the loop, which owns everything it reads.
func (a *agent) recordMetrics(d calc.Desired, des dataplane.Desired, took time.Duration, err error) {
	m := a.metrics
	m.applySeconds.Observe(took.Seconds())
	if err != nil {
		m.applyErrors.Inc()
	}
	m.localEndpoints.Set(float64(len(d.Endpoints) + m.cluster.localHostEndpoints()))
	m.activePolicies.Set(float64(d.LocalPolicies))
	selectors := map[string]bool{} // one per selector, whatever its families
	var sets [2]int
	for name, s := range d.IPSets {
		if len(name) > 6 {
			selectors[name[6:]] = true
		}
		if s.Family == "inet6" {
			sets[1]++
		} else {
			sets[0]++
		}
	}
	m.activeSelectors.Set(float64(len(selectors)))
	m.ipsetsCalico.WithLabelValues("4").Set(float64(sets[0]))
	m.ipsetsCalico.WithLabelValues("6").Set(float64(sets[1]))
	for _, c := range a.dp.TableCounts(des) {
		m.chains.WithLabelValues(ipVersionLabel(c.IPVersion), c.Table).Set(float64(c.Chains))
		m.rules.WithLabelValues(ipVersionLabel(c.IPVersion), c.Table).Set(float64(c.Rules))
		m.linesExecuted.WithLabelValues(ipVersionLabel(c.IPVersion), c.Table) // served from 0, as Calico's
	}
	m.clusterHosts.Set(float64(len(m.cluster.hosts)))
	m.clusterWorkloads.Set(float64(len(m.cluster.workloads)))
	m.clusterHostEndpoints.Set(float64(len(m.cluster.hostEPs)))
	m.clusterPolicies.Set(float64(len(m.cluster.policies)))
	m.clusterProfiles.Set(float64(len(m.cluster.profiles)))
	m.clusterTiers.Set(float64(len(m.cluster.tiers)))
	m.ipam.set(a.cfg.NodeName, a.bgpState.blocks)
	if a.bgp != nil {
		if sp := a.bgp.published.Load(); sp != nil {
			m.bgp.speaker.Store(sp)
		}
		imported := make([]netip.Prefix, 0, len(a.extraRoutes))
		for p := range a.extraRoutes {
			imported = append(imported, p)
		}
		m.bgp.setRoutes(imported, a.bgpState.advertisements())
	}
}

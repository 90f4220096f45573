package metrics

import (
	"net/netip"
	"time"

	"github.com/calico-aio/calico-aio/bgp"
	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/ipam"
)

// ObserveUpdate counts one datastore update (the end-of-list marker is
// not one) and follows it for the cluster-wide counts.
func (m *Metrics) ObserveUpdate(u calc.Update) {
	m.unsupported.observe(u)
	if u.Kind == "" {
		return
	}
	m.updates.WithLabelValues(u.Kind).Inc()
	m.cluster.observe(u)
}

// Applied is what one apply did, for Record.
type Applied struct {
	Desired calc.Desired           // what the calculation wanted
	Tables  []dataplane.TableCount // the chains and rules handed to the dataplane
	Took    time.Duration          // how long the apply took
	Err     error                  // whether it failed
	Blocks  map[string]*ipam.Block // the IPAM blocks known, by CIDR
	BGP     bool                   // BGP runs; the fields below are set only then
	Speaker *bgp.Speaker           // the running speaker (nil: none yet)
	// Imported are the routes learned and installed, Advertised the
	// prefixes advertised.
	Imported, Advertised []netip.Prefix
}

// Record sets the gauges after an apply. The loop calls it; it owns
// everything Applied holds.
func (m *Metrics) Record(a Applied) {
	d := a.Desired
	m.applySeconds.Observe(a.Took.Seconds())
	if a.Err != nil {
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
	for _, c := range a.Tables {
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
	m.ipam.set(m.cluster.node, a.Blocks)
	if a.BGP {
		if a.Speaker != nil {
			m.bgp.speaker.Store(a.Speaker)
		}
		m.bgp.setRoutes(a.Imported, a.Advertised)
	}
}

// Package metrics owns the node agent's Prometheus series (names, types,
// labels, the registry and the /metrics handler) and the observers that
// feed them from the update stream, the dataplane's commands and the applies.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/calico-aio/calico-aio/bgp"
	"github.com/calico-aio/calico-aio/iptables"
)

// Metrics are the agent's Prometheus series. Names, types and labels of the
// felix_* and bgp_* series are Calico's (docs/METRICS.md); calico_* series
// are ours, for what Calico does not export.
type Metrics struct {
	reg *prometheus.Registry

	// Dataplane loop.
	applySeconds prometheus.Summary
	applyErrors  prometheus.Counter
	resyncs      prometheus.Counter
	updates      *prometheus.CounterVec // by type (resource kind)

	// Calculation results for this host.
	localEndpoints  prometheus.Gauge
	activePolicies  prometheus.Gauge
	activeSelectors prometheus.Gauge
	ipsetsCalico    *prometheus.GaugeVec // by ip_version

	// Commands the dataplane ran.
	restoreCalls, restoreErrors prometheus.Counter
	saveCalls, saveErrors       prometheus.Counter
	linesExecuted               *prometheus.CounterVec // by ip_version, table
	chains, rules               *prometheus.GaugeVec   // by ip_version, table
	ipsetCalls, ipsetErrors     prometheus.Counter
	ipsetLines                  prometheus.Counter

	// Cluster-wide counts.
	clusterHosts, clusterWorkloads, clusterHostEndpoints prometheus.Gauge
	clusterPolicies, clusterProfiles, clusterTiers       prometheus.Gauge
	cluster                                              *clusterCounts

	bgp         *bgpCollector
	ipam        *ipamGauges
	unsupported *unsupportedTracker

	// The Go runtime's and the process's collectors, registered while
	// prometheusGoMetricsEnabled / prometheusProcessMetricsEnabled say so.
	goColl, procColl prometheus.Collector
	goOn, procOn     bool

	nft *nftablesWatch // nftablesMode Auto (nftables.go)
}

// New makes the series for node; journalDir is the CNI journal whose
// backlog calico_cni_journal_pending serves.
func New(node, journalDir string) *Metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	byTable := []string{"ip_version", "table"}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		// Calico serves this as a summary with these quantiles; its Grafana
		// dashboard queries {quantile="0.5|0.9|0.99"}.
		applySeconds: prometheus.NewSummary(prometheus.SummaryOpts{Name: "felix_int_dataplane_apply_time_seconds",
			Help:       "Time in seconds that it took to apply a dataplane update.",
			Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001}}),
		applyErrors: counter("felix_int_dataplane_failures", "Number of times dataplane updates failed and will be retried."),
		resyncs:     counter("felix_resyncs_started", "Number of times the agent started a full resync of the dataplane."),
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "felix_calc_graph_updates_processed",
			Help: "Number of datastore updates processed by the calculation graph."}, []string{"type"}),

		localEndpoints:  gauge("felix_active_local_endpoints", "Number of active endpoints (workload+host) on this host."),
		activePolicies:  gauge("felix_active_local_policies", "Number of active policies on this host."),
		activeSelectors: gauge("felix_active_local_selectors", "Number of active selectors on this host."),
		ipsetsCalico: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "felix_ipsets_calico",
			Help: "Number of active Calico IP sets."}, []string{"ip_version"}),

		restoreCalls:  counter("felix_iptables_restore_calls", "Number of iptables-restore calls."),
		restoreErrors: counter("felix_iptables_restore_errors", "Number of iptables-restore errors."),
		saveCalls:     counter("felix_iptables_save_calls", "Number of iptables-save calls."),
		saveErrors:    counter("felix_iptables_save_errors", "Number of iptables-save errors."),
		linesExecuted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "felix_iptables_lines_executed",
			Help: "Number of iptables rule updates executed."}, byTable),
		chains: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "felix_iptables_chains",
			Help: "Number of active iptables chains."}, byTable),
		rules: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "felix_iptables_rules",
			Help: "Number of active iptables rules."}, byTable),
		ipsetCalls:  counter("felix_ipset_calls", "Number of ipset commands executed."),
		ipsetErrors: counter("felix_ipset_errors", "Number of ipset command failures."),
		ipsetLines:  counter("felix_ipset_lines_executed", "Number of ipset operations executed."),

		clusterHosts:         gauge("felix_cluster_num_hosts", "Total number of Calico hosts in the cluster."),
		clusterWorkloads:     gauge("felix_cluster_num_workload_endpoints", "Total number of workload endpoints cluster-wide."),
		clusterHostEndpoints: gauge("felix_cluster_num_host_endpoints", "Total number of host endpoints cluster-wide."),
		clusterPolicies:      gauge("felix_cluster_num_policies", "Total number of policies in the cluster."),
		clusterProfiles:      gauge("felix_cluster_num_profiles", "Total number of profiles in the cluster."),
		clusterTiers:         gauge("felix_cluster_num_tiers", "Total number of Calico tiers in the cluster."),
		cluster:              newClusterCounts(node),

		bgp:         newBGPCollector(node),
		ipam:        newIPAMGauges(journalDir),
		unsupported: newUnsupportedTracker(),
		nft:         newNFTablesWatch(),
	}
	m.reg.MustRegister(m.applySeconds, m.applyErrors, m.resyncs, m.updates,
		m.localEndpoints, m.activePolicies, m.activeSelectors, m.ipsetsCalico,
		m.restoreCalls, m.restoreErrors, m.saveCalls, m.saveErrors, m.linesExecuted, m.chains, m.rules,
		m.ipsetCalls, m.ipsetErrors, m.ipsetLines,
		m.clusterHosts, m.clusterWorkloads, m.clusterHostEndpoints, m.clusterPolicies, m.clusterProfiles, m.clusterTiers,
		m.bgp, m.unsupported.gauge, m.nft.gauge)
	m.ipam.register(m.reg)
	m.goColl, m.procColl = prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{})
	m.SetRuntimeCollectors(true, true) // Calico's defaults
	return m
}

// SetRuntimeCollectors serves the Go runtime's go_* series while goOn and
// the process's process_* series while procOn (prometheusGoMetricsEnabled,
// prometheusProcessMetricsEnabled); a change applies to the next scrape.
func (m *Metrics) SetRuntimeCollectors(goOn, procOn bool) {
	for _, c := range []struct {
		on   bool
		was  *bool
		coll prometheus.Collector
	}{{goOn, &m.goOn, m.goColl}, {procOn, &m.procOn, m.procColl}} {
		switch {
		case c.on && !*c.was:
			m.reg.MustRegister(c.coll)
		case !c.on && *c.was:
			m.reg.Unregister(c.coll)
		}
		*c.was = c.on
	}
}

// ObserveExec counts one iptables or ipset command (the dataplane's
// iptables.Observer). It runs on the loop's goroutine; the counters are
// safe for the scrape to read concurrently.
func (m *Metrics) ObserveExec(e iptables.Exec) {
	failed := e.Err != nil
	switch {
	case e.IPSet:
		m.ipsetCalls.Inc()
		if failed {
			m.ipsetErrors.Inc()
		}
		m.ipsetLines.Add(float64(e.Lines))
	case e.Op == iptables.OpSave:
		m.saveCalls.Inc()
		if failed {
			m.saveErrors.Inc()
		}
	case e.Op == iptables.OpRestore:
		m.restoreCalls.Inc()
		if failed {
			m.restoreErrors.Inc()
		} else {
			m.linesExecuted.WithLabelValues(ipVersionLabel(e.IPVersion), e.Table).Add(float64(e.Lines))
		}
	}
}

// ipVersionLabel is Calico's ip_version label value for felix_* series.
func ipVersionLabel(v int) string {
	if v == 6 {
		return "6"
	}
	return "4"
}

// Handler serves the series on /metrics.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	return mux
}

// Gather gathers the registry's series (Metrics is a prometheus.Gatherer).
func (m *Metrics) Gather() ([]*dto.MetricFamily, error) { return m.reg.Gather() }

// Resync counts one full resync of the dataplane started.
func (m *Metrics) Resync() { m.resyncs.Inc() }

// BGPRouteUpdates counts route updates received from the BGP speaker.
func (m *Metrics) BGPRouteUpdates(evs []bgp.RouteEvent) { m.bgp.routeUpdates(evs) }

// OverrideBGPPeers makes peers, not the speaker, the source of bgp_peers
// (tests).
func (m *Metrics) OverrideBGPPeers(peers func() []bgp.PeerStatus) { m.bgp.peers = peers }

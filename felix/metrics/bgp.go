package metrics

import (
	"net/netip"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/calico-aio/calico-aio/bgp"
)

// bgpStatuses are the session states Calico's bgp_peers reports, each
// served (0 when no peer is in it) so a query by status always finds a
// series.
var bgpStatuses = []string{"Idle", "Connect", "Active", "OpenSent", "OpenConfirm", "Established", "Close", "Down", "Passive"}

// bgpCollector serves Calico's BGP metrics (bgp_peers, bgp_routes_imported,
// bgp_route_updates_received: labels instance and ip_version "IPv4" or
// "IPv6", as calico-node's BGP exporter has them) and ours for what Calico
// has none (calico_bgp_routes_advertised). Peers are read from the speaker
// at scrape time; the route counts are set by the loop.
type bgpCollector struct {
	instance string
	speaker  atomic.Pointer[bgp.Speaker]
	peers    func() []bgp.PeerStatus // overrides the speaker in tests

	peersDesc  *prometheus.Desc
	imported   *prometheus.GaugeVec
	received   *prometheus.GaugeVec
	advertised *prometheus.GaugeVec
}

func newBGPCollector(instance string) *bgpCollector {
	byFamily := []string{"instance", "ip_version"}
	return &bgpCollector{instance: instance,
		peersDesc: prometheus.NewDesc("bgp_peers", "Total number of peers of a given status for a given node.",
			[]string{"status", "instance", "ip_version"}, nil),
		imported: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "bgp_routes_imported",
			Help: "Current number of routes successfully imported into a given node's routing table."}, byFamily),
		received: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "bgp_route_updates_received",
			Help: "Total number of route updates received by a given node over time (since startup)."}, byFamily),
		advertised: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "calico_bgp_routes_advertised",
			Help: "Prefixes this node advertises over BGP (affine blocks and borrowed addresses)."}, byFamily),
	}
}

func bgpFamily(a netip.Addr) string {
	if a.Unmap().Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// setRoutes records the routes learned and installed (imported) and the
// prefixes advertised, by family.
func (c *bgpCollector) setRoutes(imported, advertised []netip.Prefix) {
	for _, fam := range []string{"IPv4", "IPv6"} {
		c.imported.WithLabelValues(c.instance, fam).Set(0)
		c.advertised.WithLabelValues(c.instance, fam).Set(0)
		c.received.WithLabelValues(c.instance, fam) // served from 0
	}
	for _, p := range imported {
		c.imported.WithLabelValues(c.instance, bgpFamily(p.Addr())).Inc()
	}
	for _, p := range advertised {
		c.advertised.WithLabelValues(c.instance, bgpFamily(p.Addr())).Inc()
	}
}

// routeUpdates counts route updates received from the speaker.
func (c *bgpCollector) routeUpdates(evs []bgp.RouteEvent) {
	for _, ev := range evs {
		c.received.WithLabelValues(c.instance, bgpFamily(ev.Prefix.Addr())).Inc()
	}
}

func (c *bgpCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.peersDesc
	c.imported.Describe(ch)
	c.received.Describe(ch)
	c.advertised.Describe(ch)
}

func (c *bgpCollector) Collect(ch chan<- prometheus.Metric) {
	peers := c.peers
	if peers == nil {
		if sp := c.speaker.Load(); sp != nil {
			peers = sp.PeerStatus
		}
	}
	if peers != nil {
		counts := map[[2]string]int{}
		for _, p := range peers() {
			st := p.State
			if st == "Unknown" || st == "" {
				st = "Down"
			}
			counts[[2]string{st, bgpFamily(p.Address)}]++
		}
		for _, fam := range []string{"IPv4", "IPv6"} {
			for _, st := range bgpStatuses {
				ch <- prometheus.MustNewConstMetric(c.peersDesc, prometheus.GaugeValue, float64(counts[[2]string{st, fam}]), st, c.instance, fam)
			}
		}
	}
	c.imported.Collect(ch)
	c.received.Collect(ch)
	c.advertised.Collect(ch)
}

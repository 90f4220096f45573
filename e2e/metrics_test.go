package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/internal/promtest"
)

// metricsAddr is the --metrics-addr the harness gave the agent.
func (a *agentProc) metricsAddr() string {
	for i, arg := range a.cmd.Args {
		if arg == "--metrics-addr" && i+1 < len(a.cmd.Args) {
			return a.cmd.Args[i+1]
		}
	}
	a.t.Fatal("agent started without --metrics-addr")
	return ""
}

// scrapeMetrics fetches the agent's /metrics from inside its namespace and
// parses it with Prometheus' own text parser.
func (a *agentProc) scrapeMetrics() (promtest.Scrape, error) {
	code, body := httpGetIn(a.ns, "http://"+a.metricsAddr()+"/metrics")
	if code != 200 {
		return nil, fmt.Errorf("GET /metrics: %d %.300s", code, body)
	}
	return promtest.Parse(strings.NewReader(body))
}

// TestMetricsAgentScrape runs the real binary as calico-node and scrapes
// it: Calico's series carry Calico's types and labels, and they move when
// a pod is created and deleted through the CNI plugin.
func TestMetricsAgentScrape(t *testing.T) {
	e := newCNIEnv(t, 93)
	e.pool("p", "10.193.0.0/24")
	a := e.startAgent("node1")

	var before promtest.Scrape
	eventually(t, 10*time.Second, "first apply recorded", func() error {
		s, err := a.scrapeMetrics()
		if err != nil {
			return err
		}
		if s.Must("felix_int_dataplane_apply_time_seconds") < 1 || s.Must("felix_iptables_restore_calls") < 1 {
			return fmt.Errorf("no apply yet: %v applies, %v restores", s.Must("felix_int_dataplane_apply_time_seconds"), s.Must("felix_iptables_restore_calls"))
		}
		before = s
		return nil
	})
	for name, typ := range map[string]string{
		"felix_active_local_endpoints":           "gauge",
		"felix_active_local_policies":            "gauge",
		"felix_active_local_selectors":           "gauge",
		"felix_cluster_num_hosts":                "gauge",
		"felix_cluster_num_workload_endpoints":   "gauge",
		"felix_cluster_num_host_endpoints":       "gauge",
		"felix_int_dataplane_apply_time_seconds": "summary",
		"felix_int_dataplane_failures":           "counter",
		"felix_resyncs_started":                  "counter",
		"felix_calc_graph_updates_processed":     "counter",
		"felix_iptables_restore_calls":           "counter",
		"felix_iptables_restore_errors":          "counter",
		"felix_iptables_save_calls":              "counter",
		"felix_iptables_save_errors":             "counter",
		"felix_iptables_chains":                  "gauge",
		"felix_iptables_rules":                   "gauge",
		"felix_iptables_lines_executed":          "counter",
		"felix_ipset_calls":                      "counter",
		"felix_ipset_errors":                     "counter",
		"felix_ipsets_calico":                    "gauge",
		"calico_ipam_blocks":                     "gauge",
		"calico_ipam_allocations_in_use":         "gauge",
		"calico_cni_journal_pending":             "gauge",
	} {
		if got := before.Type(name); got != typ {
			t.Errorf("%s: type %q, want %q", name, got, typ)
		}
	}
	if got := before.LabelNames("felix_iptables_chains"); len(got) != 1 || got[0] != "ip_version,table" {
		t.Errorf("felix_iptables_chains labels %q, want ip_version,table", got)
	}
	if v, ok := before.Value("felix_iptables_chains", "ip_version", "4", "table", "filter"); !ok || v < 1 {
		t.Errorf("filter chains = %v (found %v), want our chains counted", v, ok)
	}
	for name, want := range map[string]float64{"felix_active_local_endpoints": 0, "felix_cluster_num_hosts": 1,
		"felix_cluster_num_workload_endpoints": 0, "felix_iptables_restore_errors": 0, "felix_iptables_save_errors": 0} {
		if got := before.Must(name); got != want {
			t.Errorf("before any pod: %s = %v, want %v", name, got, want)
		}
	}

	l := e.conflist("1.0.0", "metrics", e.calicoPlugin("node1", ""))
	p := e.newPod(l, "metricspod")
	eventually(t, 15*time.Second, "metrics count the pod", func() error {
		s, err := a.scrapeMetrics()
		if err != nil {
			return err
		}
		got := map[string]float64{
			"felix_active_local_endpoints":         s.Must("felix_active_local_endpoints"),
			"felix_cluster_num_workload_endpoints": s.Must("felix_cluster_num_workload_endpoints"),
			"calico_ipam_blocks":                   s.Must("calico_ipam_blocks", "ip_version", "4"),
			"calico_ipam_allocations_in_use":       s.Must("calico_ipam_allocations_in_use", "ip_version", "4"),
		}
		for name, v := range got {
			if v != 1 {
				return fmt.Errorf("%s = %v, want 1 (all: %v)", name, v, got)
			}
		}
		if r, r0 := s.Must("felix_iptables_restore_calls"), before.Must("felix_iptables_restore_calls"); r <= r0 {
			return fmt.Errorf("restore calls %v, not above %v before the pod", r, r0)
		}
		if c, c0 := s.Must("felix_iptables_rules", "ip_version", "4", "table", "filter"), before.Must("felix_iptables_rules", "ip_version", "4", "table", "filter"); c <= c0 {
			return fmt.Errorf("filter rules %v, not above %v before the pod", c, c0)
		}
		return nil
	})
	if err := e.del(l, p.rt); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "metrics drop the pod", func() error {
		s, err := a.scrapeMetrics()
		if err != nil {
			return err
		}
		if v, u := s.Must("felix_active_local_endpoints"), s.Must("calico_ipam_allocations_in_use", "ip_version", "4"); v != 0 || u != 0 {
			return fmt.Errorf("after DEL: active local endpoints %v, addresses in use %v; want 0, 0", v, u)
		}
		return nil
	})
}

// TestMetricsBGPSessions: two real calico-node processes in a BGP mesh.
// Calico's bgp_* series report the established session and the routes
// learned, ours the routes advertised; killing the peer moves the session
// out of Established.
func TestMetricsBGPSessions(t *testing.T) {
	c := newCluster(t, 2, "10.239.0")
	createPool(t, c.cl, "pool", "10.194.0.0/16", 26)
	c.startAll()
	c.waitMesh(1)
	c.nodes[1].pod("net", "metrics-remote")
	n1, n2 := c.nodes[0].agent, c.nodes[1].agent
	established := func(s promtest.Scrape) float64 {
		return s.Must("bgp_peers", "status", "Established", "ip_version", "IPv4", "instance", "node1")
	}
	eventually(t, 20*time.Second, "node1 reports the session and the learned block", func() error {
		s, err := n1.scrapeMetrics()
		if err != nil {
			return err
		}
		if got := s.LabelNames("bgp_peers"); len(got) != 1 || got[0] != "instance,ip_version,status" {
			return fmt.Errorf("bgp_peers label sets %q", got)
		}
		if e, idle := established(s), s.Must("bgp_peers", "status", "Idle", "ip_version", "IPv4"); e != 1 || idle != 0 {
			return fmt.Errorf("bgp_peers Established=%v Idle=%v, want 1, 0", e, idle)
		}
		if v := s.Must("bgp_routes_imported", "ip_version", "IPv4", "instance", "node1"); v < 1 {
			return fmt.Errorf("bgp_routes_imported = %v, want node2's block", v)
		}
		if v := s.Must("bgp_route_updates_received", "ip_version", "IPv4"); v < 1 {
			return fmt.Errorf("bgp_route_updates_received = %v", v)
		}
		if v := s.Must("felix_cluster_num_hosts"); v != 2 {
			return fmt.Errorf("felix_cluster_num_hosts = %v, want 2", v)
		}
		return nil
	})
	eventually(t, 20*time.Second, "node2 reports its advertised block", func() error {
		s, err := n2.scrapeMetrics()
		if err != nil {
			return err
		}
		if v := s.Must("calico_bgp_routes_advertised", "ip_version", "IPv4", "instance", "node2"); v < 1 {
			return fmt.Errorf("calico_bgp_routes_advertised = %v, want node2's block", v)
		}
		if v := s.Must("calico_ipam_blocks", "ip_version", "4"); v != 1 {
			return fmt.Errorf("calico_ipam_blocks = %v, want 1", v)
		}
		return nil
	})
	c.nodes[1].kill()
	eventually(t, 30*time.Second, "node1 reports the session down", func() error {
		s, err := n1.scrapeMetrics()
		if err != nil {
			return err
		}
		if e := established(s); e != 0 {
			return fmt.Errorf("bgp_peers Established = %v after the peer was killed", e)
		}
		return nil
	})
}

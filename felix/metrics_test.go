package felix

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/bgp"
	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/felix/metrics"
	"github.com/calico-aio/calico-aio/felix/peering"
	"github.com/calico-aio/calico-aio/internal/promtest"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// calicoSeries are the series Calico's felix and calico-node BGP exporter
// serve that we serve too: name, type and label names exactly as Calico's
// ("" for none), checked against its "Felix Prometheus statistics"
// reference and BGP metrics page.
var calicoSeries = []struct{ name, typ, labels string }{
	{"felix_active_local_endpoints", "gauge", ""},
	{"felix_active_local_policies", "gauge", ""},
	{"felix_active_local_selectors", "gauge", ""},
	{"felix_calc_graph_updates_processed", "counter", "type"},
	{"felix_cluster_num_hosts", "gauge", ""},
	{"felix_cluster_num_workload_endpoints", "gauge", ""},
	{"felix_cluster_num_host_endpoints", "gauge", ""},
	{"felix_cluster_num_policies", "gauge", ""},
	{"felix_cluster_num_profiles", "gauge", ""},
	{"felix_cluster_num_tiers", "gauge", ""},
	{"felix_int_dataplane_apply_time_seconds", "summary", ""},
	{"felix_int_dataplane_failures", "counter", ""},
	{"felix_resyncs_started", "counter", ""},
	{"felix_iptables_restore_calls", "counter", ""},
	{"felix_iptables_restore_errors", "counter", ""},
	{"felix_iptables_save_calls", "counter", ""},
	{"felix_iptables_save_errors", "counter", ""},
	{"felix_iptables_chains", "gauge", "ip_version,table"},
	{"felix_iptables_rules", "gauge", "ip_version,table"},
	{"felix_iptables_lines_executed", "counter", "ip_version,table"},
	{"felix_ipset_calls", "counter", ""},
	{"felix_ipset_errors", "counter", ""},
	{"felix_ipset_lines_executed", "counter", ""},
	{"felix_ipsets_calico", "gauge", "ip_version"},
	{"bgp_peers", "gauge", "instance,ip_version,status"},
	{"bgp_routes_imported", "gauge", "instance,ip_version"},
	{"bgp_route_updates_received", "gauge", "instance,ip_version"},
}

// ourSeries are ours, for what Calico has none.
var ourSeries = []struct{ name, typ, labels string }{
	{"calico_ipam_blocks", "gauge", "ip_version"},
	{"calico_ipam_block_addresses", "gauge", "ip_version"},
	{"calico_ipam_allocations_in_use", "gauge", "ip_version"},
	{"calico_cni_journal_pending", "gauge", ""},
	{"calico_bgp_routes_advertised", "gauge", "instance,ip_version"},
	{"calico_kube_proxy_nftables_mode", "gauge", ""},
}

func scrape(t *testing.T, m *metrics.Metrics) promtest.Scrape {
	t.Helper()
	s, err := promtest.GetHandler(m.Handler())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func resKey(plural, name string) string {
	return "/calico/resources/v3/projectcalico.org/" + plural + "/" + name
}

func testWEP(node, pod, iface, ip string) calc.Update {
	w := &api.WorkloadEndpoint{}
	w.Kind, w.APIVersion = "WorkloadEndpoint", "projectcalico.org/v3"
	w.Metadata.Namespace, w.Metadata.Name = "default", node+"-k8s-"+pod+"-eth0"
	w.Spec = api.WorkloadEndpointSpec{Orchestrator: "k8s", Node: node, Pod: pod, Endpoint: "eth0",
		InterfaceName: iface, IPNetworks: []string{ip}, MAC: "ee:ee:ee:00:00:01"}
	return calc.Update{Kind: "workloadendpoints", Key: resKey("workloadendpoints", "default/"+w.Metadata.Name), Resource: w}
}

func testNodeUpdate(name string) calc.Update {
	n := &api.Node{}
	n.Kind, n.APIVersion = "Node", "projectcalico.org/v3"
	n.Metadata.Name = name
	return calc.Update{Kind: "nodes", Key: resKey("nodes", name), Resource: n}
}

func testHEP(name, node string) calc.Update {
	h := &api.HostEndpoint{}
	h.Kind, h.APIVersion = "HostEndpoint", "projectcalico.org/v3"
	h.Metadata.Name = name
	h.Spec.Node, h.Spec.InterfaceName = node, "eth9"
	return calc.Update{Kind: "hostendpoints", Key: resKey("hostendpoints", name), Resource: h}
}

// testNamed is an update for a cluster-scoped resource r of kind plural.
func testNamed(plural string, r api.Resource, name string) calc.Update {
	return calc.Update{Kind: plural, Key: resKey(plural, name), Resource: r}
}

// testApply does what agent.apply does for metrics, without the kernel.
func testApply(a *agent) {
	d := a.state.Desired(false)
	des := dataplane.Desired{Tables: map[int]map[string][]iptables.Chain{}}
	for ver, t := range d.Tables {
		des.Tables[ver] = map[string][]iptables.Chain{"filter": t.Filter, "nat": t.NAT, "mangle": t.Mangle, "raw": t.Raw}
	}
	a.recordMetrics(d, des, 3*time.Millisecond, nil)
}

// TestMetricsScrape scrapes the agent's /metrics with Prometheus' parser:
// every Calico series has Calico's name, type and labels, and each moves
// when what it counts happens.
func TestMetricsScrape(t *testing.T) {
	lib := t.TempDir()
	a := newAgent(config.Config{NodeName: "node1", LibDir: lib, ResyncInterval: time.Minute}, nil, false)
	a.metrics.OverrideBGPPeers(func() []bgp.PeerStatus {
		return []bgp.PeerStatus{
			{Address: netip.MustParseAddr("10.0.0.2"), State: "Established"},
			{Address: netip.MustParseAddr("10.0.0.3"), State: "Active"},
			{Address: netip.MustParseAddr("fd00::3"), State: "Established"},
		}
	})
	a.bgp = &peering.Runner{} // BGP on, speaker not yet published
	for _, u := range []calc.Update{testNodeUpdate("node1"), testNodeUpdate("node2"),
		testWEP("node2", "remote", "cali0000000002", "10.65.1.2/32"), {InSync: true}} {
		a.fold(u)
	}
	testApply(a)
	before := scrape(t, a.metrics)
	for _, set := range [][]struct{ name, typ, labels string }{calicoSeries, ourSeries} {
		for _, want := range set {
			if got := before.Type(want.name); got != want.typ {
				t.Errorf("%s: type %q, want %q", want.name, got, want.typ)
				continue
			}
			if got := before.LabelNames(want.name); len(got) != 1 || got[0] != want.labels {
				t.Errorf("%s: label sets %q, want exactly %q", want.name, got, want.labels)
			}
		}
	}
	// Calico's quantiles, which its dashboard queries.
	var qs []float64
	for _, m := range before["felix_int_dataplane_apply_time_seconds"].GetMetric() {
		for _, q := range m.GetSummary().GetQuantile() {
			qs = append(qs, q.GetQuantile())
		}
	}
	if len(qs) != 3 || qs[0] != 0.5 || qs[1] != 0.9 || qs[2] != 0.99 {
		t.Errorf("apply time quantiles %v, want [0.5 0.9 0.99]", qs)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"felix_active_local_endpoints", nil, 0},
		{"felix_cluster_num_hosts", nil, 2},
		{"felix_cluster_num_workload_endpoints", nil, 1},
		{"felix_cluster_num_host_endpoints", nil, 0},
		{"felix_int_dataplane_apply_time_seconds", nil, 1}, // sample count
		{"felix_calc_graph_updates_processed", []string{"type", "nodes"}, 2},
		{"bgp_peers", []string{"status", "Established", "ip_version", "IPv4", "instance", "node1"}, 1},
		{"bgp_peers", []string{"status", "Active", "ip_version", "IPv4"}, 1},
		{"bgp_peers", []string{"status", "Idle", "ip_version", "IPv4"}, 0},
		{"bgp_peers", []string{"status", "Established", "ip_version", "IPv6"}, 1},
		{"calico_cni_journal_pending", nil, 0},
		{"calico_ipam_blocks", []string{"ip_version", "4"}, 0},
	} {
		if got, ok := before.Value(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("before: %s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}

	// Things happen: a local pod, a host endpoint here, an affine block
	// with one address in use, a journaled delete, commands run, learned
	// and advertised routes.
	one := 0
	aff := "host:node1"
	blk := &ipam.Block{CIDR: "10.65.0.0/26", Affinity: &aff, Allocations: make([]*int, 64)}
	blk.Allocations[2] = &one
	for i := range 64 {
		if i != 2 {
			blk.Unallocated = append(blk.Unallocated, i)
		}
	}
	for _, u := range []calc.Update{testWEP("node1", "local", "cali0000000001", "10.65.0.2/32"), testHEP("eth9", "node1"),
		{Kind: calc.KindBlock, Key: "/calico/ipam/v2/assignment/ipv4/block/10.65.0.0-26", Block: blk},
		testNamed("globalnetworkpolicies", &api.GlobalNetworkPolicy{}, "deny"), testNamed("profiles", &api.Profile{}, "kns.default"),
		testNamed("tiers", &api.Tier{}, "security")} {
		a.fold(u)
	}
	if err := os.MkdirAll(filepath.Join(lib, "pending-releases"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lib, "pending-releases", "handle1"), []byte(`{"handle":"handle1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	obs := a.metrics.ObserveExec
	obs(iptables.Exec{Op: iptables.OpSave, IPVersion: 4, Table: "filter"})
	obs(iptables.Exec{Op: iptables.OpSave, IPVersion: 4, Table: "filter", Err: errors.New("exit status 4")})
	obs(iptables.Exec{Op: iptables.OpRestore, IPVersion: 4, Table: "filter", Lines: 7})
	obs(iptables.Exec{Op: iptables.OpRestore, IPVersion: 6, Table: "nat", Lines: 3, Err: errors.New("exit status 2")})
	obs(iptables.Exec{Op: iptables.OpRestore, IPSet: true, Lines: 5})
	obs(iptables.Exec{Op: iptables.OpSave, IPSet: true, Err: errors.New("exit status 1")})
	a.metrics.Resync()
	evs := []bgp.RouteEvent{{Prefix: netip.MustParsePrefix("10.65.1.0/26"), NextHops: []netip.Addr{netip.MustParseAddr("10.0.0.2")}}}
	peering.ApplyRouteEvents(a.extraRoutes, evs)
	a.metrics.BGPRouteUpdates(evs)
	testApply(a)
	after := scrape(t, a.metrics)

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"felix_active_local_endpoints", nil, 2}, // the pod and the host endpoint
		{"felix_cluster_num_workload_endpoints", nil, 2},
		{"felix_cluster_num_host_endpoints", nil, 1},
		{"felix_cluster_num_policies", nil, 1},
		{"felix_cluster_num_profiles", nil, 1},
		{"felix_cluster_num_tiers", nil, 1},
		{"felix_int_dataplane_apply_time_seconds", nil, 2},
		{"felix_resyncs_started", nil, 1},
		{"felix_iptables_save_calls", nil, 2},
		{"felix_iptables_save_errors", nil, 1},
		{"felix_iptables_restore_calls", nil, 2},
		{"felix_iptables_restore_errors", nil, 1},
		{"felix_iptables_lines_executed", []string{"ip_version", "4", "table", "filter"}, 7},
		{"felix_ipset_calls", nil, 2},
		{"felix_ipset_errors", nil, 1},
		{"felix_ipset_lines_executed", nil, 5},
		{"felix_calc_graph_updates_processed", []string{"type", "workloadendpoints"}, 2},
		{"bgp_routes_imported", []string{"ip_version", "IPv4", "instance", "node1"}, 1},
		{"bgp_route_updates_received", []string{"ip_version", "IPv4"}, 1},
		{"calico_bgp_routes_advertised", []string{"ip_version", "IPv4"}, 1}, // the affine block
		{"calico_ipam_blocks", []string{"ip_version", "4"}, 1},
		{"calico_ipam_block_addresses", []string{"ip_version", "4"}, 64},
		{"calico_ipam_allocations_in_use", []string{"ip_version", "4"}, 1},
		{"calico_cni_journal_pending", nil, 1},
	} {
		if got, ok := after.Value(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("after: %s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// The local pod's chains and rules show in the filter table.
	if after.Must("felix_iptables_chains", "ip_version", "4", "table", "filter") <= before.Must("felix_iptables_chains", "ip_version", "4", "table", "filter") ||
		after.Must("felix_iptables_rules", "ip_version", "4", "table", "filter") <= before.Must("felix_iptables_rules", "ip_version", "4", "table", "filter") {
		t.Errorf("filter chains/rules did not grow with a local endpoint: %v/%v -> %v/%v",
			before.Must("felix_iptables_chains", "ip_version", "4", "table", "filter"), before.Must("felix_iptables_rules", "ip_version", "4", "table", "filter"),
			after.Must("felix_iptables_chains", "ip_version", "4", "table", "filter"), after.Must("felix_iptables_rules", "ip_version", "4", "table", "filter"))
	}
	// The agent's dataplane manages (empties) the IPv6 tables without IPv6.
	if v, ok := after.Value("felix_iptables_chains", "ip_version", "6", "table", "filter"); !ok || v != 0 {
		t.Errorf("IPv6 filter chains without IPv6: %v (found %v), want 0", v, ok)
	}
}

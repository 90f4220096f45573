package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// TestConfigRouteSyncDisabledLive: routeSyncDisabled written while the
// agent runs stops it programming routes: a deleted pod route is not put
// back (routes re-read every second) and a deviceRouteProtocol change does
// not reprogram; turned off again, the route comes back with the new
// protocol.
func TestConfigRouteSyncDisabledLive(t *testing.T) {
	t.Parallel()
	e := newCNIEnv(t, 237)
	e.pool("p", "10.237.0.0/24")
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.RouteRefreshInterval = secs(1) })
	l := e.conflist("1.0.0", "rsnet", e.calicoPlugin("node1", ""))
	e.startAgent("node1")
	a := e.newPod(l, "rs1")
	proto := func(want string) func([]string) bool {
		return func(f []string) bool { return after(f, "proto") == want && strings.HasPrefix(after(f, "dev"), "cali") }
	}
	e.waitRoute("the agent's route to the pod (metric 1024), alone", a.ip, func(f []string) bool {
		return proto("80")(f) && after(f, "metric") == "1024" && strings.Count(e.routeLine(a.ip), "\n") == 0
	})
	e.felixDefault(func(s *api.FelixConfigurationSpec) {
		on, p := true, 77
		s.RouteSyncDisabled, s.DeviceRouteProtocol = &on, &p
	})
	time.Sleep(3 * time.Second) // three route re-reads
	if line := e.routeLine(a.ip); after(strings.Fields(line), "proto") != "80" {
		t.Fatalf("routeSyncDisabled: the route was reprogrammed: %q", line)
	}
	mustNS(t, e.host.ns, "ip", "route", "del", a.ip+"/32")
	time.Sleep(3 * time.Second)
	if line := e.routeLine(a.ip); line != "" {
		t.Fatalf("routeSyncDisabled: the deleted route was put back: %q", line)
	}
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.RouteSyncDisabled = nil })
	e.waitRoute("routeSyncDisabled off: the route back, proto 77", a.ip, proto("77"))
}

// TestConfigNFTablesModeAutoLive: under nftablesMode Auto (unset: Calico's
// default) the agent programs iptables, and when kube-proxy's nftables
// table appears in its namespace it says so once in its log and with
// calico_kube_proxy_nftables_mode 1; the gauge goes back to 0 when the
// table goes, and nftablesMode Disabled written while it runs stops the
// looking (0 with the table back).
func TestConfigNFTablesModeAutoLive(t *testing.T) {
	t.Parallel()
	e := newCNIEnv(t, 238)
	e.pool("p", "10.238.0.0/24")
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.RouteRefreshInterval = secs(1) }) // an apply every second
	a := e.startAgent("node1")
	gauge := func(want float64) func() error {
		return func() error {
			s, err := a.scrapeMetrics()
			if err != nil {
				return err
			}
			if v, ok := s.Value("calico_kube_proxy_nftables_mode"); !ok || v != want {
				return fmt.Errorf("calico_kube_proxy_nftables_mode %v (served %v), want %v", v, ok, want)
			}
			return nil
		}
	}
	eventually(t, 15*time.Second, "no kube-proxy table: 0", gauge(0))
	mustNS(t, e.host.ns, "nft", "add", "table", "ip", "kube-proxy")
	eventually(t, 20*time.Second, "kube-proxy's table: 1", gauge(1))
	const msg = "kube-proxy runs in nftables mode"
	if n := strings.Count(a.logs.String(), msg); n != 1 {
		t.Errorf("%q logged %d times, want once", msg, n)
	}
	if !strings.Contains(mustNS(t, e.host.ns, "iptables-save", "-t", "filter"), ":cali-FORWARD") {
		t.Error("nftablesMode Auto with kube-proxy in nftables mode: our iptables chains are gone")
	}
	mustNS(t, e.host.ns, "nft", "delete", "table", "ip", "kube-proxy")
	eventually(t, 20*time.Second, "table gone: 0", gauge(0))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.NFTablesMode = "Disabled" })
	time.Sleep(2 * time.Second) // the change applied
	mustNS(t, e.host.ns, "nft", "add", "table", "ip", "kube-proxy")
	time.Sleep(7 * time.Second) // past the 5 s between looks
	if err := gauge(0)(); err != nil {
		t.Errorf("nftablesMode Disabled: %v", err)
	}
}

// TestConfigRoutePriorityLive: the agent's route to a pod carries
// ipv4NormalRoutePriority (Calico's 1024 by default), replacing the CNI
// plugin's (the kernel's default metric); a value written while the agent
// runs replaces the route, one route at a time, and removing it brings
// 1024 back.
func TestConfigRoutePriorityLive(t *testing.T) {
	t.Parallel()
	e := newCNIEnv(t, 239)
	e.pool("p", "10.239.0.0/24")
	l := e.conflist("1.0.0", "prionet", e.calicoPlugin("node1", ""))
	e.startAgent("node1")
	a := e.newPod(l, "pr1")
	metric := func(want string) func([]string) bool {
		return func(f []string) bool {
			return after(f, "metric") == want && strings.HasPrefix(after(f, "dev"), "cali") && strings.Count(e.routeLine(a.ip), "\n") == 0
		}
	}
	e.waitRoute("one route, metric 1024", a.ip, metric("1024"))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { p := 300; s.IPv4NormalRoutePriority = &p })
	e.waitRoute("one route, metric 300", a.ip, metric("300"))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.IPv4NormalRoutePriority = nil })
	e.waitRoute("one route, metric 1024 again", a.ip, metric("1024"))
}

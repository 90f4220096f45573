package e2e

import (
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
	e.waitRoute("the pod's route, proto 80", a.ip, proto("80"))
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

package felix

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/routes"
)

// TestRoutePrioritySettings: the routes to local workloads carry
// ipv4NormalRoutePriority / ipv6NormalRoutePriority (1024 when unset, as
// Calico v3.32); the elevated priorities are validated (1-2147483646, the
// field named) but give no route their metric: only a live-migrating
// workload's routes get it in Calico, and none migrates here.
func TestRoutePrioritySettings(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.65.0.1"), netip.MustParseAddr("fd00::1")
	for _, tc := range []struct {
		s      spec
		m4, m6 int
	}{
		{spec{}, 1024, 1024},
		{spec{IPv4NormalRoutePriority: ptr(100)}, 100, 1024},
		{spec{IPv6NormalRoutePriority: ptr(7), IPv4ElevatedRoutePriority: ptr(5), IPv6ElevatedRoutePriority: ptr(3)}, 1024, 7},
	} {
		d := routes.DeviceRoutes(deviceRouteConfig(&tc.s))
		if got4, got6 := d.Target("cali1", v4).Metric, d.Target("cali1", v6).Metric; got4 != tc.m4 || got6 != tc.m6 {
			t.Errorf("%+v: workload route metrics %d, %d; want %d, %d", tc.s, got4, got6, tc.m4, tc.m6)
		}
	}
	for _, bad := range []struct{ field, value string }{
		{"ipv4ElevatedRoutePriority", "0"}, {"ipv6ElevatedRoutePriority", "2147483647"},
		{"ipv4NormalRoutePriority", "-3"}, {"ipv6NormalRoutePriority", "0"},
	} {
		err := fc(t, "default", bad.field, bad.value).Validate()
		if err == nil || !strings.Contains(err.Error(), "spec."+bad.field+":") {
			t.Errorf("%s %s: %v, want an error naming spec.%s", bad.field, bad.value, err, bad.field)
		}
	}
	if err := fc(t, "default", "ipv4ElevatedRoutePriority", "512").Validate(); err != nil {
		t.Errorf("ipv4ElevatedRoutePriority 512 refused: %v", err)
	}
}

package cni

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// TestEndpointResultRoutes: the ADD result has, as Calico's recorded one,
// the pod's /32 address and a route to the address with its block's mask
// ({"dst":"10.244.166.129/26"}, host bits kept); none without IPAM routes.
func TestEndpointResultRoutes(t *testing.T) {
	w := &api.WorkloadEndpoint{}
	w.Spec.InterfaceName, w.Spec.Endpoint = "calib8419a605df", "eth0"
	w.Spec.IPNetworks = []string{"10.244.166.129/32", "fd00:10::5/128"}
	r := endpointResult(w, "/var/run/netns/p", netip.MustParsePrefix("10.244.166.129/26"), netip.MustParsePrefix("fd00:10::5/122"))
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"address":"10.244.166.129/32"`, `"address":"fd00:10::5/128"`,
		`"routes":[{"dst":"10.244.166.129/26"},{"dst":"fd00:10::5/122"}]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("result %s lacks %s", b, want)
		}
	}
	if b, _ := json.Marshal(endpointResult(w, "/var/run/netns/p")); strings.Contains(string(b), "routes") {
		t.Errorf("result without IPAM routes: %s", b)
	}
}

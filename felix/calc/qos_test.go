package calc_test

import (
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// TestQoSControls: an endpoint's qosControls, with Calico's defaults,
// reach its local endpoint (for the tbf) and its chains (packet rate,
// connections, and egress bandwidth where the kernel cannot shape it); a
// change and a removal follow.
func TestQoSControls(t *testing.T) {
	ds := datastore{}
	w := wep("default", "a", thisNode, "calia", nil, []string{"10.64.0.1/32"}, "open")
	w.Spec.QoSControls = &api.QoSControls{IngressBandwidth: 10_000_000, IngressPacketRate: 100, EgressMaxConnections: 7}
	ds.put(t, w)
	ds.put(t, profile("open", nil))
	s := fresh(t, ds, 0)
	qosRules := func() string {
		d := s.Desired(false)
		keep := func(r iptables.Rule) bool {
			return strings.Contains(r.Match, "-m limit") || strings.Contains(r.Match, "connlimit") || strings.Contains(r.Match, "hashlimit")
		}
		return chainRules(d.Tables[4].Filter, "cali-tw-calia", keep) + chainRules(d.Tables[4].Filter, "cali-fw-calia", keep)
	}
	d := s.Desired(false)
	if len(d.Endpoints) != 1 || d.Endpoints[0].QoS == nil || *d.Endpoints[0].QoS != (api.QoSControls{IngressBandwidth: 10_000_000, IngressBurst: 4 << 30,
		IngressPacketRate: 100, IngressPacketBurst: 5, EgressMaxConnections: 7}) {
		t.Fatalf("local endpoints %+v: want the qosControls with Calico's defaults", d.Endpoints)
	}
	if r := qosRules(); !strings.Contains(r, "--limit 100/sec --limit-burst 5") || !strings.Contains(r, "--connlimit-above 7") || strings.Contains(r, "hashlimit") {
		t.Fatalf("QoS rules:\n%s", r)
	}
	advance(t, &ds, func(next datastore) {
		w.Spec.QoSControls = &api.QoSControls{EgressBandwidth: 8_000_000, EgressBurst: 8_000_000}
		next.put(t, w)
	}, s.Apply)
	if r := qosRules(); r != "" {
		t.Fatalf("after the change, with the kernel shaping egress, QoS rules:\n%s", r)
	}
	s.SetEgressPolicing(true) // a kernel that cannot
	if r := qosRules(); !strings.Contains(r, "--hashlimit-above 1000000b/s") || strings.Contains(r, "-m limit") || strings.Contains(r, "connlimit") {
		t.Fatalf("after the change, egress policed, QoS rules:\n%s", r)
	}
	if d := s.Desired(false); d.Endpoints[0].QoS.IngressBandwidth != 0 {
		t.Fatalf("after the change: %+v", d.Endpoints[0].QoS)
	}
	advance(t, &ds, func(next datastore) { w.Spec.QoSControls = nil; next.put(t, w) }, s.Apply)
	if r, d := qosRules(), s.Desired(false); r != "" || d.Endpoints[0].QoS != nil {
		t.Fatalf("after removal: rules %q, endpoint QoS %+v", r, d.Endpoints[0].QoS)
	}
}

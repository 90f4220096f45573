package api

import (
	"strings"
	"testing"
)

// WorkloadEndpoint qosControls is enforced: the agent shapes, polices and
// limits with it (felix/rules, felix/dataplane, e2e TestQoS*).
func init() {
	enforced["WorkloadEndpoint.spec.qosControls"] = "TestQoSBandwidthAnnotation"
}

func TestWorkloadEndpointQoSControlsValidation(t *testing.T) {
	wep := func(q *QoSControls) *WorkloadEndpoint {
		w := &WorkloadEndpoint{}
		w.Metadata.Name, w.Metadata.Namespace = "node1-k8s-pod1-eth0", "default"
		w.Spec.InterfaceName = "cali1234567890a"
		w.Spec.QoSControls = q
		return w
	}
	ok := []*QoSControls{
		nil, {},
		{IngressBandwidth: 1000, IngressBurst: 1000, IngressPeakrate: 1010, IngressMinburst: 1000},
		{EgressBandwidth: 1_000_000_000_000_000, EgressBurst: 34359738360, EgressPeakrate: 1_010_000_000_000_000, EgressMinburst: 100_000_000},
		{IngressPacketRate: 10000, IngressPacketBurst: 10000, EgressPacketRate: 1, IngressMaxConnections: 4294967295, EgressMaxConnections: 1},
	}
	for _, q := range ok {
		if err := wep(q).Validate(); err != nil {
			t.Errorf("%+v: %v", q, err)
		}
	}
	bad := []struct {
		q    QoSControls
		want string
	}{
		{QoSControls{IngressBandwidth: 999}, `spec.qosControls.ingressBandwidth: "999" must be between 1000 and`},
		{QoSControls{EgressBandwidth: -5}, `spec.qosControls.egressBandwidth: "-5" must be between`},
		{QoSControls{EgressBandwidth: 1000, EgressBurst: 34359738361}, `spec.qosControls.egressBurst: "34359738361" must be between`},
		{QoSControls{IngressPacketRate: 10001}, `spec.qosControls.ingressPacketRate: "10001" must be between 1 and 10000`},
		{QoSControls{EgressMaxConnections: 4294967296}, `spec.qosControls.egressMaxConnections`},
		{QoSControls{IngressBurst: 5000}, `spec.qosControls.ingressBurst: "5000" needs ingressBandwidth`},
		{QoSControls{EgressBandwidth: 2000, EgressPeakrate: 2000}, `spec.qosControls.egressPeakrate: "2000" must be greater than egressBandwidth`},
		{QoSControls{IngressBandwidth: 2000, IngressPeakrate: 3000, IngressMinburst: 99}, `spec.qosControls.ingressMinburst: "99" must be between`},
		{QoSControls{IngressBandwidth: 2000, IngressMinburst: 1500}, `spec.qosControls.ingressMinburst: "1500" needs ingressPeakrate`},
		{QoSControls{EgressPacketBurst: 3}, `spec.qosControls.egressPacketBurst: "3" needs egressPacketRate`},
	}
	for _, c := range bad {
		err := wep(&c.q).Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.q, err, c.want)
		}
	}
}

func TestQoSControlsWithDefaults(t *testing.T) {
	if (*QoSControls)(nil).WithDefaults() != nil {
		t.Error("nil should stay nil")
	}
	got := (&QoSControls{IngressBandwidth: 1000, EgressBandwidth: 1000, EgressBurst: 2000, IngressPacketRate: 3, EgressPacketRate: 4, EgressPacketBurst: 9}).WithDefaults()
	want := QoSControls{IngressBandwidth: 1000, IngressBurst: 4 << 30, EgressBandwidth: 1000, EgressBurst: 2000,
		IngressPacketRate: 3, IngressPacketBurst: 5, EgressPacketRate: 4, EgressPacketBurst: 9}
	if *got != want {
		t.Errorf("got %+v, want %+v", *got, want)
	}
}

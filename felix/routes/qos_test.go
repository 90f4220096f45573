package routes

import (
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// TestEgressShapingOrPolicing: where the kernel shapes egress (an ifb
// device), an endpoint's egress bandwidth becomes a tbf and rules do not
// police it; where it cannot, and in the zero value, there is no tbf and
// rules police it (docs/QOS.md).
func TestEgressShapingOrPolicing(t *testing.T) {
	q := &api.QoSControls{EgressBandwidth: 20_000_000}
	shaped := Egress{shape: true}
	if tb := shaped.Shaping(q); tb == nil || tb.Rate != 20_000_000 || shaped.Policed() {
		t.Errorf("shaping kernel: tbf %+v, policed %v; want a 20M tbf, not policed", tb, shaped.Policed())
	}
	if tb := shaped.Shaping(nil); tb != nil {
		t.Errorf("shaping kernel, no qosControls: tbf %+v", tb)
	}
	var policed Egress
	if tb := policed.Shaping(q); tb != nil || !policed.Policed() {
		t.Errorf("policing kernel: tbf %+v, policed %v; want none, policed", tb, policed.Policed())
	}
}

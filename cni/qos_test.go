package cni

import (
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/calico-aio/calico-aio/store/api"
)

// ADD reads the pod's QoS annotations (k8s.PodQoS) into the endpoint's
// qosControls, and refuses a bad one as CNI error 7 naming the pod and the
// annotation.
func TestKubePodQoS(t *testing.T) {
	kp, err := parseKubePod(testConf("calico-ipam", false, false),
		testPod(map[string]string{"qos.projectcalico.org/ingressBandwidth": "10M"}), testNamespace(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := api.QoSControls{IngressBandwidth: 10_000_000, IngressBurst: 4 << 30}
	if kp.qos == nil || *kp.qos != want {
		t.Fatalf("qos %+v, want %+v", kp.qos, want)
	}
	var w api.WorkloadEndpoint
	if err := kp.applyTo(&w, nil); err != nil {
		t.Fatal(err)
	}
	if w.Spec.QoSControls != kp.qos {
		t.Errorf("endpoint qosControls %+v, want the parsed ones", w.Spec.QoSControls)
	}

	_, err = parseKubePod(testConf("calico-ipam", false, false),
		testPod(map[string]string{"qos.projectcalico.org/egressPacketRate": "0"}), testNamespace(nil))
	var te *types.Error
	if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig ||
		!strings.Contains(te.Msg, "pod shop/web: annotation qos.projectcalico.org/egressPacketRate: ") || !strings.Contains(te.Msg, "greater than zero") {
		t.Errorf("got %v, want CNI error 7 naming the pod and the annotation", err)
	}
}

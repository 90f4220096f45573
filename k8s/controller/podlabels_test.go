package controller

import (
	"maps"
	"reflect"
	"testing"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/api"
)

func TestSyncPodLabels(t *testing.T) {
	e := newGCEnv(t)
	e.addPodNet("n1", "shop", "web")
	e.addPodNet("n1", "shop", "gone") // no pod: left alone
	web := pod("shop", "web", map[string]string{"app": "web", api.LabelNamespace: "bank", api.LabelOrchestrator: "x"})
	web.Spec.ServiceAccountName = "shopper"
	e.kube.pods = []k8s.Pod{web}
	get := func(name string) *api.WorkloadEndpoint {
		t.Helper()
		r, err := e.cl.GetResource(e.ctx, wepKind, "shop", name)
		if err != nil {
			t.Fatal(err)
		}
		return r.(*api.WorkloadEndpoint)
	}
	before, gone := get("n1-k8s-web-eth0"), get("n1-k8s-gone-eth0")
	if err := e.c.syncPodLabels(e.ctx); err != nil {
		t.Fatal(err)
	}
	after := get("n1-k8s-web-eth0")
	want := map[string]string{"app": "web", api.LabelNamespace: "shop", api.LabelOrchestrator: "k8s", api.LabelServiceAccount: "shopper"}
	if !maps.Equal(after.Metadata.Labels, want) {
		t.Errorf("labels %v, want %v", after.Metadata.Labels, want)
	}
	if !reflect.DeepEqual(after.Spec, before.Spec) {
		t.Errorf("spec changed: %+v -> %+v", before.Spec, after.Spec)
	}
	if g := get("n1-k8s-gone-eth0"); g.Metadata.ResourceVersion != gone.Metadata.ResourceVersion {
		t.Error("endpoint of a missing pod rewritten")
	}

	// Unchanged: not rewritten.
	if err := e.c.syncPodLabels(e.ctx); err != nil {
		t.Fatal(err)
	}
	if g := get("n1-k8s-web-eth0"); g.Metadata.ResourceVersion != after.Metadata.ResourceVersion {
		t.Error("unchanged endpoint rewritten")
	}

	// A stale copy: the compare-and-swap fails, the endpoint is read
	// again and the other writer's change is kept.
	stale := after
	fresh := *get("n1-k8s-web-eth0")
	fresh.Spec.MAC = "ee:ee:ee:ee:ee:ee"
	if _, err := e.cl.UpdateResource(e.ctx, &fresh); err != nil {
		t.Fatal(err)
	}
	if err := e.c.setFromPod(e.ctx, stale, fromPod{labels: map[string]string{"app": "web2"}}); err != nil {
		t.Fatal(err)
	}
	got := get("n1-k8s-web-eth0")
	if got.Metadata.Labels["app"] != "web2" || got.Spec.MAC != "ee:ee:ee:ee:ee:ee" {
		t.Errorf("after a conflict: labels %v, mac %q", got.Metadata.Labels, got.Spec.MAC)
	}
}

// A pod's QoS annotations changed after ADD reach its endpoint's
// qosControls (added, changed, removed); a refused value keeps what the
// endpoint has.
func TestSyncPodQoS(t *testing.T) {
	e := newGCEnv(t)
	e.addPodNet("n1", "shop", "web")
	web := pod("shop", "web", map[string]string{"app": "web"})
	get := func() *api.WorkloadEndpoint {
		t.Helper()
		r, err := e.cl.GetResource(e.ctx, wepKind, "shop", "n1-k8s-web-eth0")
		if err != nil {
			t.Fatal(err)
		}
		return r.(*api.WorkloadEndpoint)
	}
	for _, c := range []struct {
		an   map[string]string
		want *api.QoSControls
	}{
		{map[string]string{"qos.projectcalico.org/ingressBandwidth": "10M"}, &api.QoSControls{IngressBandwidth: 10_000_000, IngressBurst: 4 << 30}},
		{map[string]string{"qos.projectcalico.org/ingressBandwidth": "20M", "qos.projectcalico.org/egressMaxConnections": "5"},
			&api.QoSControls{IngressBandwidth: 20_000_000, IngressBurst: 4 << 30, EgressMaxConnections: 5}},
		{map[string]string{"qos.projectcalico.org/ingressBandwidth": "nonsense"}, // refused: kept
			&api.QoSControls{IngressBandwidth: 20_000_000, IngressBurst: 4 << 30, EgressMaxConnections: 5}},
		{nil, nil},
	} {
		web.Metadata.Annotations = c.an
		e.kube.pods = []k8s.Pod{web}
		if err := e.c.syncPodLabels(e.ctx); err != nil {
			t.Fatal(err)
		}
		if got := get().Spec.QoSControls; !sameQoS(got, c.want) {
			t.Errorf("annotations %v: qosControls %+v, want %+v", c.an, got, c.want)
		}
	}
}

package controller

import (
	"testing"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/etcdv3"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// The controller's writers keep what Calico stored beyond our types: the
// pod-label update of a workload endpoint, and the rewrite of a profile it
// owns from the namespace (which builds a fresh object).
func TestControllerWritesKeepUnmodelledFields(t *testing.T) {
	e := newGCEnv(t)
	var wep storetest.CalicoObject
	for _, o := range storetest.CalicoObjectsWithUnmodelledFields() {
		if o.Key == etcdv3.ResourcePrefix+"workloadendpoints/default/node1-k8s-pod1-eth0" {
			wep = o
		}
	}
	storetest.PutRaw(t, e.cl, wep)
	p := pod("default", "pod1", map[string]string{"app": "web2"})
	p.Spec.ServiceAccountName = "default"
	// The endpoint's qosControls come from the pod's annotations (the
	// stored ones are the same limit): what Calico stored beside them stays.
	p.Metadata.Annotations = map[string]string{"qos.projectcalico.org/ingressBandwidth": "10M"}
	e.kube.pods = []k8s.Pod{p}
	if err := e.c.syncPodLabels(e.ctx); err != nil {
		t.Fatal(err)
	}
	storetest.CheckUnmodelledKept(t, e.cl, wep, "the pod label update")
	if got, _ := storetest.JSONAt(storetest.StoredJSON(t, e.cl, wep.Key), "metadata.labels.app"); got != "web2" {
		t.Errorf("label app = %v, want web2", got)
	}

	prof := storetest.CalicoObject{
		Key: etcdv3.ResourcePrefix + "profiles/kns.default",
		Value: `{"kind":"Profile","apiVersion":"projectcalico.org/v3","metadata":{"name":"kns.default","uid":"2f193db5-95a3-4e3b-a651-2b876c4a1681","creationTimestamp":"2026-11-21T08:30:00Z","generation":1},` +
			`"spec":{"ingress":[{"action":"Allow","source":{},"destination":{},"futureRuleField":"kept"}],"egress":[{"action":"Allow","source":{},"destination":{}}],"labelsToApply":{"pcns.projectcalico.org/name":"old"},"futureSpecField":7}}`,
		Unmodelled: []string{"metadata.generation", "spec.futureSpecField", "spec.ingress.0.futureRuleField"},
	}
	storetest.PutRaw(t, e.cl, prof)
	e.kube.nss = []k8s.Namespace{{Metadata: k8s.ObjectMeta{Name: "default"}}}
	if err := e.c.syncProfiles(e.ctx); err != nil {
		t.Fatal(err)
	}
	storetest.CheckUnmodelledKept(t, e.cl, prof, "the profile sync")
	lta, _ := storetest.JSONAt(storetest.StoredJSON(t, e.cl, prof.Key), "spec.labelsToApply")
	if m, _ := lta.(map[string]any); m["pcns.projectcalico.org/name"] != "default" {
		t.Errorf("the profile's modelled labelsToApply was not rewritten: %v", lta)
	}
	kv, err := storetest.Raw(t, e.cl).GetKey(e.ctx, prof.Key)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.syncProfiles(e.ctx); err != nil {
		t.Fatal(err)
	}
	again, err := storetest.Raw(t, e.cl).GetKey(e.ctx, prof.Key)
	if err != nil {
		t.Fatal(err)
	}
	if again.Revision != kv.Revision {
		t.Errorf("an unchanged profile was rewritten because of its unmodelled fields")
	}
}

package controller

import (
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/k8s"
)

// TestSyncKDD: on the Kubernetes datastore the controller copies nothing
// (no kns./ksa. profiles, no knp.default. policies) and releases the IPAM
// of a Kubernetes node that is gone (its addresses, then its block
// affinities) once the grace period is over and a GET confirms it; a
// node that exists keeps its own.
func TestSyncKDD(t *testing.T) {
	e := newGCEnv(t)
	e.c.KDD = true
	e.kube.nss = []k8s.Namespace{{Metadata: k8s.ObjectMeta{Name: "shop"}}}
	e.kube.nps = []k8s.NetworkPolicy{{Metadata: k8s.ObjectMeta{Namespace: "shop", Name: "np"}}}
	e.kube.nodes = []k8s.Node{{Metadata: k8s.ObjectMeta{Name: "k3"}}}
	// The pods still exist in the API: only the node's removal frees them.
	e.kube.pods = []k8s.Pod{pod("shop", "a", nil), pod("shop", "c", nil)}
	assign := func(node, handle, podName string) {
		t.Helper()
		if _, err := e.al.AutoAssign(e.ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: handle, Node: node,
			Attrs: map[string]string{ipam.AttrNamespace: "shop", ipam.AttrPod: podName}}); err != nil {
			t.Fatal(err)
		}
	}
	assign("k1", "k8s-pod-network.ca", "a")
	assign("k3", "k8s-pod-network.cc", "c")
	check := func(k1Gone bool) {
		t.Helper()
		if got := e.held("k8s-pod-network.ca"); got == k1Gone {
			t.Errorf("k1's address held %v", got)
		}
		if got := e.affinities("k1"); (got == 0) != k1Gone {
			t.Errorf("k1 has %d affinities", got)
		}
		if !e.held("k8s-pod-network.cc") || e.affinities("k3") == 0 {
			t.Errorf("k3's address or affinity released")
		}
		if e.exists(profileKind, "", "kns.shop") || e.exists(networkPolicyKind, "shop", "knp.default.np") {
			t.Errorf("Kubernetes objects copied into Calico resources")
		}
	}
	if err := e.sync(0); err != nil {
		t.Fatal(err)
	}
	check(false)
	e.kube.hiddenNodes = []k8s.Node{{Metadata: k8s.ObjectMeta{Name: "k1"}}}
	if err := e.sync(testGrace); err != nil {
		t.Fatal(err)
	}
	check(false) // the GET found it: forgotten
	e.kube.hiddenNodes = nil
	if err := e.sync(2 * testGrace); err != nil {
		t.Fatal(err)
	}
	check(false) // orphaned again, from here
	if err := e.sync(3*testGrace + time.Second); err != nil {
		t.Fatal(err)
	}
	check(true)
}

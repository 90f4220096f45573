package e2e

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/k8s/controller"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// TestK8sControllerNodeLabels runs the controller against a real
// kube-apiserver: a Kubernetes node's labels are copied onto the Calico Node
// whose k8s orchRef names it (recorded in projectcalico.org/kube-labels),
// follow label changes and removals from the watch, and labels set on the
// Calico Node by hand stay. A Calico Node without an orchRef is untouched.
func TestK8sControllerNodeLabels(t *testing.T) {
	t.Parallel()
	kapi := kubeapi.Start(t, storetest.StartEtcd(t).Endpoints()[0])
	do := func(method, path string, body any, want int) {
		t.Helper()
		if code, out := kapi.Do(t, method, path, body); code != want {
			t.Fatalf("%s %s: %d %s", method, path, code, out)
		}
	}
	do(http.MethodPost, "/api/v1/nodes", map[string]any{"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": "k8s-a", "labels": map[string]string{"zone": "a", "kubernetes.io/os": "linux"}}}, http.StatusCreated)
	do(http.MethodPost, "/api/v1/nodes", map[string]any{"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": "k8s-b", "labels": map[string]string{"zone": "b"}}}, http.StatusCreated)

	ctx := context.Background()
	cl := storetest.StartEtcd(t).Client(t)
	nodeKind := kcKind("Node")
	calicoNode := func(name, ref string, labels map[string]string) {
		t.Helper()
		n := nodeKind.NewObject().(*api.Node)
		n.Metadata.Name, n.Metadata.Labels = name, labels
		n.Spec.BGP = &api.NodeBGPSpec{IPv4Address: "192.0.2.1/24"}
		if ref != "" {
			n.Spec.OrchRefs = []api.OrchRef{{NodeName: ref, Orchestrator: "k8s"}}
			n.Spec.BGP.IPv4Address = "192.0.2.2/24"
		}
		if _, err := cl.CreateResource(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	calicoNode("node-a", "k8s-a", map[string]string{"route-reflector": "true"}) // set by hand
	calicoNode("standalone", "", map[string]string{"mine": "yes"})

	c, err := controller.New(cl, kapi.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	c.Resync, c.Logf = time.Hour, t.Logf // the watch, not the resync, must carry changes
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(cctx) }()
	t.Cleanup(func() { cancel(); <-done })

	meta := func(name string) (map[string]string, map[string]string, error) {
		r, err := cl.GetResource(ctx, nodeKind, "", name)
		if err != nil {
			return nil, nil, err
		}
		m := r.GetObjectMeta()
		return m.Labels, m.Annotations, nil
	}
	expect := func(what string, labels map[string]string, recorded string) {
		t.Helper()
		eventually(t, 10*time.Second, what, func() error {
			l, a, err := meta("node-a")
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(l, labels) {
				return fmt.Errorf("labels %v, want %v", l, labels)
			}
			if a["projectcalico.org/kube-labels"] != recorded {
				return fmt.Errorf("annotation %q, want %q", a["projectcalico.org/kube-labels"], recorded)
			}
			return nil
		})
	}
	expect("first sync", map[string]string{"zone": "a", "kubernetes.io/os": "linux", "route-reflector": "true"},
		`{"kubernetes.io/os":"linux","zone":"a"}`)

	// A changed label, a new one and a removed one follow from the watch.
	do(http.MethodPatch, "/api/v1/nodes/k8s-a", map[string]any{"metadata": map[string]any{"labels": map[string]any{
		"zone": "a2", "rack": "r1", "kubernetes.io/os": nil}}}, http.StatusOK)
	expect("after the patch", map[string]string{"zone": "a2", "rack": "r1", "route-reflector": "true"}, `{"rack":"r1","zone":"a2"}`)

	// Kubernetes wins a key both set; removing it there removes it here.
	do(http.MethodPatch, "/api/v1/nodes/k8s-a", map[string]any{"metadata": map[string]any{"labels": map[string]any{
		"route-reflector": "false"}}}, http.StatusOK)
	expect("kubernetes sets route-reflector", map[string]string{"zone": "a2", "rack": "r1", "route-reflector": "false"},
		`{"rack":"r1","route-reflector":"false","zone":"a2"}`)
	do(http.MethodPatch, "/api/v1/nodes/k8s-a", map[string]any{"metadata": map[string]any{"labels": map[string]any{
		"route-reflector": nil}}}, http.StatusOK)
	expect("kubernetes removes route-reflector", map[string]string{"zone": "a2", "rack": "r1"}, `{"rack":"r1","zone":"a2"}`)

	// A Calico Node with no k8s orchRef is not touched.
	if l, a, err := meta("standalone"); err != nil || !reflect.DeepEqual(l, map[string]string{"mine": "yes"}) || len(a) != 0 {
		t.Errorf("standalone node: labels %v annotations %v, %v", l, a, err)
	}
}

package k8s_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// TestSetNetworkUnavailable sets the Kubernetes Node's NetworkUnavailable
// condition on a real kube-apiserver as Calico does: False "CalicoIsUp"
// while running, True "CalicoIsDown" on shutdown, through nodes/status,
// leaving the node's other conditions alone.
func TestSetNetworkUnavailable(t *testing.T) {
	kapi := kubeapi.Start(t, storetest.StartEtcd(t).Endpoints()[0])
	kc, err := k8s.NewClient(kapi.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := kc.SetNetworkUnavailable(ctx, "n1", false); !errors.Is(err, k8s.ErrNotFound) {
		t.Fatalf("missing node: %v, want ErrNotFound", err)
	}
	if code, out := kapi.Do(t, http.MethodPost, "/api/v1/nodes", map[string]any{"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": "n1"}}); code != http.StatusCreated {
		t.Fatalf("creating node: %d %s", code, out)
	}
	// The kubelet's condition, and a cloud route controller's NetworkUnavailable.
	if code, out := kapi.Do(t, http.MethodPatch, "/api/v1/nodes/n1/status", map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"},
		map[string]any{"type": "NetworkUnavailable", "status": "True", "reason": "NoRouteCreated", "message": "Node created without a route"},
	}}}); code != http.StatusOK {
		t.Fatalf("patching node status: %d %s", code, out)
	}
	check := func(status, reason, message string) {
		t.Helper()
		c, ok, err := kc.NodeConditionOf(ctx, "n1", k8s.NetworkUnavailable)
		if err != nil || !ok {
			t.Fatalf("NetworkUnavailable: found %v, %v", ok, err)
		}
		if c.Status != status || c.Reason != reason || c.Message != message || c.LastTransitionTime == "" || c.LastHeartbeatTime == "" {
			t.Errorf("NetworkUnavailable = %+v, want %s %s %q with times", c, status, reason, message)
		}
		if r, ok, err := kc.NodeConditionOf(ctx, "n1", "Ready"); err != nil || !ok || r.Status != "True" || r.Reason != "KubeletReady" {
			t.Errorf("the kubelet's Ready condition changed: %+v %v %v", r, ok, err)
		}
	}
	if err := kc.SetNetworkUnavailable(ctx, "n1", false); err != nil {
		t.Fatal(err)
	}
	check("False", "CalicoIsUp", "Calico is running on this node")
	if err := kc.SetNetworkUnavailable(ctx, "n1", true); err != nil {
		t.Fatal(err)
	}
	check("True", "CalicoIsDown", "Calico is shutting down on this node")
	if _, ok, err := kc.NodeConditionOf(ctx, "n1", "Other"); err != nil || ok {
		t.Errorf("a condition the node lacks: found %v, %v", ok, err)
	}
}

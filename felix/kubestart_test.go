package felix

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/kube"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// calicoNodeUser is the calico-node service account of the manifest.
const calicoNodeUser = "system:serviceaccount:kube-system:calico-node"

// asCalicoNode is a client with the calico-node identity, bound to the
// manifest's calico-node ClusterRole.
func asCalicoNode(t *testing.T, kapi *kubeapi.Server) *k8s.Client {
	t.Helper()
	docs, err := kubeapi.ReadManifest("../build/k8s/calico-aio-kdd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rbac := "/apis/rbac.authorization.k8s.io/v1/clusterroles"
	for _, d := range docs {
		if d["kind"] == "ClusterRole" && d["metadata"].(map[string]any)["name"] == "calico-node" {
			if code, body := kapi.Do(t, http.MethodPost, rbac, d); code != http.StatusCreated {
				t.Fatalf("creating the calico-node ClusterRole: %d %s", code, body)
			}
		}
	}
	if code, body := kapi.Do(t, http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": "calico-node"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "calico-node"},
		"subjects": []map[string]any{{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": calicoNodeUser}},
	}); code != http.StatusCreated {
		t.Fatalf("binding calico-node: %d %s", code, body)
	}
	kc, err := k8s.NewClient(kapi.KubeconfigFor(t, calicoNodeUser, "system:serviceaccounts"))
	if err != nil {
		t.Fatal(err)
	}
	// The authorizer sees the binding through its informer.
	deadline := time.Now().Add(30 * time.Second)
	for _, err := kc.GetNode(context.Background(), "n1"); !errors.Is(err, k8s.ErrNotFound); _, err = kc.GetNode(context.Background(), "n1") {
		if time.Now().After(deadline) {
			t.Fatalf("calico-node reading a node: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return kc
}

// TestKubeStartup runs calico-node's start-up in a Kubernetes datastore on
// a real kube-apiserver with Calico's CRDs, as the manifest's calico-node
// identity (its ClusterRole allows all of it): Calico's objects, the
// node's annotations and NetworkUnavailable cleared while it runs,
// "CalicoIsDown" once it stops.
func TestKubeStartup(t *testing.T) {
	kapi := kubeapi.Start(t, storetest.StartEtcd(t).Endpoints()[0])
	kapi.InstallCRDs(t, "../build/k8s/crds.yaml")
	kc := asCalicoNode(t, kapi)
	c := store.NewClient(kube.NewWithClient(kc))
	defer c.Close()
	if code, body := kapi.Do(t, http.MethodPost, "/api/v1/nodes", map[string]any{"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": "n1"}}); code != http.StatusCreated {
		t.Fatalf("creating node: %d %s", code, body)
	}
	pools, err := config.ParseDefaultPools(func(k string) string { return map[string]string{"CALICO_IPV4POOL_CIDR": "10.60.0.0/16"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{NodeName: "n1", IP: "192.0.2.1/24", IP6: "none", ASNumber: 64512, DefaultPools: pools}
	// A request the role refused would be retried until ctx ends.
	ctx, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()
	v4, _, done, err := KubeStartup(ctx, c, kc, cfg, "k8s,bgp")
	if err != nil {
		t.Fatal(err)
	}
	if v4.String() != "192.0.2.1/24" {
		t.Errorf("v4 %s", v4)
	}
	get := func(path string) map[string]any {
		t.Helper()
		code, body := kapi.Do(t, http.MethodGet, path, nil)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	crd := "/apis/crd.projectcalico.org/v1/"
	if ct := get(crd + "clusterinformations/default")["spec"].(map[string]any)["clusterType"]; ct != "k8s,bgp,kdd" {
		t.Errorf("clusterType %v", ct)
	}
	for _, p := range []string{"tiers/default", "tiers/kube-admin", "tiers/kube-baseline", "felixconfigurations/default", "ippools/default-ipv4-ippool"} {
		get(crd + p)
	}
	anns := get("/api/v1/nodes/n1")["metadata"].(map[string]any)["annotations"].(map[string]any)
	if anns["projectcalico.org/IPv4Address"] != "192.0.2.1/24" || anns["projectcalico.org/ASNumber"] != "64512" {
		t.Errorf("node annotations %v", anns)
	}
	cond := func() k8s.NodeCondition {
		t.Helper()
		cd, ok, err := kc.NodeConditionOf(context.Background(), "n1", k8s.NetworkUnavailable)
		if err != nil || !ok {
			t.Fatalf("NetworkUnavailable: %v %v", ok, err)
		}
		return cd
	}
	if cd := cond(); cd.Status != "False" || cd.Reason != "CalicoIsUp" {
		t.Errorf("running: %+v", cd)
	}
	stop()
	done()
	if cd := cond(); cd.Status != "True" || cd.Reason != "CalicoIsDown" {
		t.Errorf("stopped: %+v", cd)
	}
}

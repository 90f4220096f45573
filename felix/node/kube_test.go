package node

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/kube"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// kubeCluster is a real kube-apiserver with our CRDs (equal to Calico's,
// build/crds_test.go) and a store client on its Kubernetes backend.
type kubeCluster struct {
	kapi *kubeapi.Server
	c    *store.Client
	kc   *k8s.Client
}

func startKube(t *testing.T) *kubeCluster {
	t.Helper()
	kapi := kubeapi.Start(t, storetest.StartEtcd(t).Endpoints()[0])
	kapi.InstallCRDs(t, "../../build/k8s/crds.yaml")
	kc, err := k8s.NewClient(kapi.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	c := store.NewClient(kube.NewWithClient(kc))
	t.Cleanup(func() { _ = c.Close() })
	return &kubeCluster{kapi: kapi, c: c, kc: kc}
}

// get reads an object as the API server stores it.
func (k *kubeCluster) get(t *testing.T, path string) map[string]any {
	t.Helper()
	code, body := k.kapi.Do(t, http.MethodGet, path, nil)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// cr reads a custom resource of Calico's group.
func (k *kubeCluster) cr(t *testing.T, plural, name string) map[string]any {
	t.Helper()
	return k.get(t, "/apis/crd.projectcalico.org/v1/"+plural+"/"+name)
}

// createNode creates the Kubernetes Node the kubelet would.
func (k *kubeCluster) createNode(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	code, body := k.kapi.Do(t, http.MethodPost, "/api/v1/nodes", map[string]any{"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": name, "labels": labels}})
	if code != http.StatusCreated {
		t.Fatalf("creating node %s: %d %s", name, code, body)
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestKubeBootstrap: calico-node's start-up objects land as Calico's
// custom resources: ClusterInformation with clusterType "<CLUSTER_TYPE>,kdd"
// merged into the one calicoctl made first, the three tiers,
// FelixConfiguration default and the default pool; a restart changes
// nothing.
func TestKubeBootstrap(t *testing.T) {
	k := startKube(t)
	ctx := context.Background()
	// Real calicoctl's first write made ClusterInformation with clusterType
	// "kdd" and no calicoVersion (compat/kdd/README.md).
	ciKind, _ := api.LookupKind("ClusterInformation")
	ci := ciKind.NewObject().(*api.ClusterInformation)
	ci.Metadata.Name = "default"
	ready := true
	ci.Spec.ClusterGUID, ci.Spec.ClusterType, ci.Spec.DatastoreReady = "0123456789abcdef0123456789abcdef", "kdd", &ready
	if _, err := k.c.CreateResource(ctx, ci); err != nil {
		t.Fatal(err)
	}
	pools, err := poolsFrom(t, map[string]string{"CALICO_IPV4POOL_CIDR": "10.60.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	if err := KubeBootstrap(ctx, k.c, "test", "k8s,bgp", pools); err != nil {
		t.Fatal(err)
	}
	spec := func(plural, name string) string {
		t.Helper()
		return jsonOf(k.cr(t, plural, name)["spec"])
	}
	for _, tc := range []struct{ plural, name, want string }{
		{"clusterinformations", "default", `{"calicoVersion":"` + api.CalicoAPIVersion + `","clusterGUID":"0123456789abcdef0123456789abcdef","clusterType":"kdd,k8s,bgp","datastoreReady":true}`},
		{"tiers", "default", `{"defaultAction":"Deny","order":1000000}`},
		{"tiers", "kube-admin", `{"defaultAction":"Pass","order":1000}`},
		{"tiers", "kube-baseline", `{"defaultAction":"Pass","order":10000000}`},
	} {
		if got := spec(tc.plural, tc.name); got != tc.want {
			t.Errorf("%s/%s spec:\n%s\nwant\n%s", tc.plural, tc.name, got, tc.want)
		}
	}
	// What calico-node sets; the defaults the store adds are its own
	// (store/api), not calico-node's.
	if fc := k.cr(t, "felixconfigurations", "default")["spec"].(map[string]any); fc["logSeverityScreen"] != "Info" || fc["reportingInterval"] != "0s" {
		t.Errorf("felixconfigurations/default spec %s: want logSeverityScreen Info, reportingInterval 0s", jsonOf(fc))
	}
	pool := k.cr(t, "ippools", "default-ipv4-ippool")
	if s := pool["spec"].(map[string]any); s["cidr"] != "10.60.0.0/16" || s["natOutgoing"] != true || s["blockSize"] != float64(26) {
		t.Errorf("default pool spec %s", jsonOf(s))
	}
	if _, ok := pool["metadata"].(map[string]any)["annotations"].(map[string]any)["projectcalico.org/metadata"]; !ok {
		t.Errorf("default pool without Calico's metadata annotation: %s", jsonOf(pool["metadata"]))
	}
	// A restart (other pool variables, another CLUSTER_TYPE entry) writes
	// nothing but the missing cluster type.
	rv := func(plural, name string) string {
		return k.cr(t, plural, name)["metadata"].(map[string]any)["resourceVersion"].(string)
	}
	before := map[string]string{}
	for _, o := range []string{"tiers/default", "felixconfigurations/default", "ippools/default-ipv4-ippool"} {
		p, n, _ := strings.Cut(o, "/")
		before[o] = rv(p, n)
	}
	again, err := poolsFrom(t, map[string]string{"CALICO_IPV4POOL_CIDR": "10.70.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	if err := KubeBootstrap(ctx, k.c, "test", "k8s,bgp,operator", again); err != nil {
		t.Fatal(err)
	}
	for o, was := range before {
		p, n, _ := strings.Cut(o, "/")
		if now := rv(p, n); now != was {
			t.Errorf("a restart rewrote %s (resourceVersion %s -> %s)", o, was, now)
		}
	}
	if got := k.cr(t, "clusterinformations", "default")["spec"].(map[string]any)["clusterType"]; got != "kdd,k8s,bgp,operator" {
		t.Errorf("clusterType after a restart %v, want kdd,k8s,bgp,operator", got)
	}
}

func TestKubeClusterType(t *testing.T) {
	for env, want := range map[string]string{"": "kdd", "k8s,bgp": "k8s,bgp,kdd", "k8s,bgp,": "k8s,bgp,kdd"} {
		if got := KubeClusterType(env); got != want {
			t.Errorf("KubeClusterType(%q) = %q, want %q", env, got, want)
		}
	}
}

// TestKubeRegister: in a Kubernetes datastore calico-node waits for its
// Kubernetes Node, saying why, and never creates it; then its address and
// AS number become the projectcalico.org/* annotations of that Node
// (written through nodes/status), whose labels stay as they are.
func TestKubeRegister(t *testing.T) {
	k := startKube(t)
	ctx := context.Background()
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	err := WaitForKubeNode(short, k.c, "n1", 50*time.Millisecond)
	var missing *KubeNodeMissingError
	if !errors.As(err, &missing) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `Kubernetes node "n1" does not exist`) {
		t.Fatalf("no Kubernetes node: %v", err)
	}
	v4 := netip.MustParsePrefix("192.0.2.1/24")
	done := make(chan error, 1)
	go func() { done <- RegisterKube(ctx, k.c, "n1", v4, netip.Prefix{}, 64512, 50*time.Millisecond) }()
	k.createNode(t, "n1", map[string]string{"kubernetes.io/hostname": "n1", "zone": "a"})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("RegisterKube did not return once the Kubernetes node existed")
	}
	meta := k.get(t, "/api/v1/nodes/n1")["metadata"].(map[string]any)
	anns, _ := meta["annotations"].(map[string]any)
	if got, want := jsonOf(anns), `{"projectcalico.org/ASNumber":"64512","projectcalico.org/IPv4Address":"192.0.2.1/24"}`; got != want {
		t.Errorf("node annotations %s, want %s", got, want)
	}
	if got, want := jsonOf(meta["labels"]), `{"kubernetes.io/hostname":"n1","zone":"a"}`; got != want {
		t.Errorf("node labels %s, want %s", got, want)
	}
	nk, _ := api.LookupKind("Node")
	r, err := k.c.GetResource(ctx, nk, "", "n1")
	if err != nil {
		t.Fatal(err)
	}
	n := r.(*api.Node)
	if n.Spec.BGP == nil || n.Spec.BGP.IPv4Address != "192.0.2.1/24" || n.Spec.BGP.ASNumber == nil || *n.Spec.BGP.ASNumber != 64512 || n.Metadata.Labels["zone"] != "a" {
		t.Errorf("Calico node read back: %s", jsonOf(n))
	}
	// The pod MTU reads pools, this node's labels and FelixConfiguration
	// through the backend: a VXLAN pool selecting zone a counts here.
	pk, _ := api.LookupKind("IPPool")
	pool := pk.NewObject().(*api.IPPool)
	pool.Metadata.Name = "vx"
	pool.Spec.CIDR, pool.Spec.VXLANMode, pool.Spec.NodeSelector = "10.61.0.0/16", "Always", "zone == 'a'"
	if _, err := k.c.CreateResource(ctx, pool); err != nil {
		t.Fatal(err)
	}
	mw := NewMTUWatch(k.c, "n1", t.TempDir(), 0, api.FelixConfigurationSpec{})
	mw.links = func() ([]LinkMTU, error) { return []LinkMTU{{Name: "eth0", MTU: 1500, Up: true}}, nil }
	if mtu, err := mw.Update(ctx); err != nil || mtu != 1450 {
		t.Errorf("pod MTU %d, %v; want 1450 (VXLAN on a 1500 link)", mtu, err)
	}
	// Another node claiming the same address is refused, as in etcd mode.
	k.createNode(t, "n2", nil)
	if err := RegisterKube(ctx, k.c, "n2", v4, netip.Prefix{}, 0, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), `already used by node "n1"`) {
		t.Errorf("n2 with n1's address: %v", err)
	}
}

// TestKubeNetworkUnavailable: NetworkUnavailable is cleared at start
// ("CalicoIsUp"), cleared again when another writer sets it, and set True
// ("CalicoIsDown") when the agent stops.
func TestKubeNetworkUnavailable(t *testing.T) {
	k := startKube(t)
	k.createNode(t, "n1", nil)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	cond := func() k8s.NodeCondition {
		t.Helper()
		c, ok, err := k.kc.NodeConditionOf(context.Background(), "n1", k8s.NetworkUnavailable)
		if err != nil || !ok {
			t.Fatalf("NetworkUnavailable: found %v, %v", ok, err)
		}
		return c
	}
	if err := SetNetworkUp(ctx, k.kc, "n1"); err != nil {
		t.Fatal(err)
	}
	if c := cond(); c.Status != "False" || c.Reason != "CalicoIsUp" || c.Message != "Calico is running on this node" {
		t.Errorf("after start: %+v", c)
	}
	done := make(chan struct{})
	go func() { KeepNetworkUp(ctx, k.kc, "n1", 50*time.Millisecond); close(done) }()
	// A cloud route controller marks the network unavailable.
	if code, body := k.kapi.Do(t, http.MethodPatch, "/api/v1/nodes/n1/status", map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "NetworkUnavailable", "status": "True", "reason": "NoRouteCreated", "message": "Node created without a route"},
	}}}); code != http.StatusOK {
		t.Fatalf("patching node status: %d %s", code, body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for c := cond(); c.Reason != "CalicoIsUp"; c = cond() {
		if time.Now().After(deadline) {
			t.Fatalf("NetworkUnavailable not cleared again: %+v", c)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	<-done
	if c := cond(); c.Status != "True" || c.Reason != "CalicoIsDown" || c.Message != "Calico is shutting down on this node" {
		t.Errorf("after stop: %+v", c)
	}
}

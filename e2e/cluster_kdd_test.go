package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/store/apiconfig"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// The multi-node cluster on the Kubernetes datastore: a real
// kube-apiserver (its own etcd is the only one) with Calico's CRDs, each
// node namespace reaching it through a relay on its loopback; every node
// has its Kubernetes Node, calico-node runs with DATASTORE_TYPE=kubernetes
// and the CNI plugin with datastore_type kubernetes. A pod is a Pod in the
// API (its WorkloadEndpoint is derived from it) before the CNI ADD.

// clusterKube is a cluster's Kubernetes datastore.
type clusterKube struct {
	t          testing.TB
	api        *kubeapi.Server
	kubeconfig map[string]string // by node name: the API through the node's relay
	namespaces map[string]bool   // created in the API
}

// newKDDCluster is newCluster on the Kubernetes datastore; c.cl is a
// client of its Kubernetes backend.
func newKDDCluster(t testing.TB, n int, subnet string) *cluster {
	t.Helper()
	c := newBridge(t, subnet)
	k := &clusterKube{t: t, api: kubeapi.Start(t, storetest.StartEtcd(t).Endpoints()[0]),
		kubeconfig: map[string]string{}, namespaces: map[string]bool{}}
	k.api.InstallCRDs(t, crdsPath)
	cl, err := apiconfig.Open(&apiconfig.Config{Type: apiconfig.Kubernetes, Kube: apiconfig.Kube{Kubeconfig: k.api.KubeconfigPath}}, apiconfig.OSHost())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	c.cl, c.kube = cl, k
	for i := 1; i <= n; i++ {
		k.join(c.addNode(i))
	}
	return c
}

// join gives node nd its relay to the API and its Kubernetes Node.
func (k *clusterKube) join(nd *clusterNode) {
	relay := relayIn(k.t, nd.ns, strings.TrimPrefix(k.api.URL, "https://"))
	k.kubeconfig[nd.name] = (&kubeCNIEnv{api: k.api}).writeKubeconfig(k.t, "https://"+relay)
	k.create("/api/v1/nodes", map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": nd.name}})
}

// create POSTs an object into the API.
func (k *clusterKube) create(path string, obj map[string]any) {
	k.t.Helper()
	if code, body := k.api.Do(k.t, http.MethodPost, path, obj); code != http.StatusCreated {
		k.t.Fatalf("POST %s: %d %s", path, code, body)
	}
}

// start runs nd's agent on the Kubernetes datastore.
func (k *clusterKube) start(nd *clusterNode, args ...string) *agentProc {
	k.t.Helper()
	env := []string{"DATASTORE_TYPE=kubernetes", "KUBECONFIG=" + k.kubeconfig[nd.name], "NO_DEFAULT_POOLS=true"}
	return startAgentWith(k.t, nd.ns, nd.name, nd.state, env, args...)
}

// conflist is nd's CNI network config on the Kubernetes datastore.
func (k *clusterKube) conflist(nd *clusterNode, network string) *libcni.NetworkConfigList {
	k.t.Helper()
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[{"type":"calico","nodename":%q,"datastore_type":"kubernetes",
"kubernetes":{"kubeconfig":%q},"calico_lib_dir":%q,"calico_run_dir":%q,"ipam":{"type":"calico-ipam"}}]}`,
		network, nd.name, k.kubeconfig[nd.name], nd.state+"/lib", nd.state+"/run")
	l, err := libcni.ConfListFromBytes([]byte(conf))
	if err != nil {
		k.t.Fatal(err)
	}
	return l
}

// namespace creates Namespace name in the API once.
func (k *clusterKube) namespace(name string) {
	k.t.Helper()
	if !k.namespaces[name] {
		k.create("/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}})
		k.namespaces[name] = true
	}
}

// serviceAccount creates ServiceAccount namespace/name with labels, or
// replaces the labels of an existing one.
func (k *clusterKube) serviceAccount(namespace, name string, labels map[string]string) {
	k.t.Helper()
	k.namespace(namespace)
	path := "/api/v1/namespaces/" + namespace + "/serviceaccounts"
	obj := map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": name, "labels": labels}}
	code, body := k.api.Do(k.t, http.MethodPut, path+"/"+name, obj)
	if code == http.StatusNotFound {
		code, body = k.api.Do(k.t, http.MethodPost, path, obj)
	}
	if code != http.StatusOK && code != http.StatusCreated {
		k.t.Fatalf("applying ServiceAccount %s/%s: %d %s", namespace, name, code, body)
	}
}

// pod creates Pod namespace/name bound to node, with labels and service
// account sa ("": none), as the scheduler leaves it for the kubelet.
func (k *clusterKube) pod(node, namespace, name, sa string, labels map[string]string) {
	k.t.Helper()
	k.namespace(namespace)
	spec := map[string]any{"nodeName": node,
		"containers": []map[string]any{{"name": "app", "image": "registry.k8s.io/pause:3.10"}}}
	if sa != "" {
		spec["serviceAccountName"] = sa
	}
	k.create("/api/v1/namespaces/"+namespace+"/pods", map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "labels": labels}, "spec": spec})
}

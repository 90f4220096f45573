package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/apiconfig"
)

// datastore is where a kubeCNIEnv's plugin keeps Calico's data.
type datastore string

const (
	onEtcd datastore = "etcdv3"     // an etcd of the test's, in the host namespace
	onKube datastore = "kubernetes" // the apiserver's custom resources (no etcd of ours)
)

// crdsPath are our CRDs, equal to Calico's (build/crds_test.go).
const crdsPath = "../build/k8s/crds.yaml"

// newKubeCNIEnvOn is a CNI host whose plugin reads pods from a real
// kube-apiserver and keeps its datastore on ds. On Kubernetes no etcd of
// ours runs: Calico's CRDs are installed and ClusterInformation default
// says the datastore is ready, as calico-node writes it; e.cl is a client
// of the Kubernetes backend (the test's own view of the same objects).
func newKubeCNIEnvOn(t testing.TB, hostIndex int, ds datastore, opts ...kubeapi.Option) *kubeCNIEnv {
	if ds == onEtcd {
		e := &kubeCNIEnv{cniEnv: newCNIEnv(t, hostIndex), ds: ds}
		e.startAPI(t, opts...)
		return e
	}
	needRoot(t)
	c := &cniEnv{t: t, host: newTestHost(t, hostIndex), bin: cniBinDir(t), cache: t.TempDir(), state: t.TempDir()}
	c.cfg = libcni.NewCNIConfigWithCacheDir([]string{c.bin}, c.cache, nil)
	e := &kubeCNIEnv{cniEnv: c, ds: ds}
	e.startAPI(t, opts...)
	e.api.InstallCRDs(t, crdsPath)
	cl, err := apiconfig.Open(&apiconfig.Config{Type: apiconfig.Kubernetes, Kube: apiconfig.Kube{Kubeconfig: e.api.KubeconfigPath}}, apiconfig.OSHost())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	e.cl = cl
	e.clusterReady(t, true)
	return e
}

// clusterReady writes ClusterInformation default as calico-node does, its
// datastoreReady as given.
func (e *kubeCNIEnv) clusterReady(t testing.TB, ready bool) {
	t.Helper()
	k, _ := api.LookupKind("ClusterInformation")
	ctx := context.Background()
	r, err := e.cl.GetResource(ctx, k, "", "default")
	if err != nil {
		ci := k.NewObject().(*api.ClusterInformation)
		ci.Metadata.Name = "default"
		ci.Spec = api.ClusterInformationSpec{ClusterGUID: "5f2ad1c6c0b4497cb0b1f1b8d2e1c3a4", ClusterType: "k8s,bgp,kdd", DatastoreReady: &ready}
		if _, err := e.cl.CreateResource(ctx, ci); err != nil {
			t.Fatal(err)
		}
		return
	}
	ci := r.(*api.ClusterInformation)
	ci.Spec.DatastoreReady = &ready
	if _, err := e.cl.UpdateResource(ctx, ci); err != nil {
		t.Fatal(err)
	}
}

// datastoreKeys are the netconf's datastore keys.
func (e *kubeCNIEnv) datastoreKeys() string {
	if e.ds == onKube {
		return `"datastore_type":"kubernetes"`
	}
	b, _ := json.Marshal(e.etcd.Endpoints()[0])
	return `"etcd_endpoints":` + string(b)
}

// assertClean: no host links, no allocations and no endpoint with an
// address (on Kubernetes every pod on the node has an endpoint; only its
// addresses come and go with ADD and DEL).
func (e *kubeCNIEnv) assertClean() {
	e.t.Helper()
	if e.ds == onEtcd {
		e.cniEnv.assertClean()
		return
	}
	if l := e.hostLinks(); len(l) != 0 {
		e.t.Errorf("host links left: %v", l)
	}
	weps, _, err := e.cl.ListResources(context.Background(), wepKindInfo(), "")
	if err != nil {
		e.t.Errorf("listing endpoints: %v", err)
	}
	for _, r := range weps {
		if w := r.(*api.WorkloadEndpoint); len(w.Spec.IPNetworks) != 0 {
			e.t.Errorf("endpoint %s/%s still has addresses %v", w.Metadata.Namespace, w.Metadata.Name, w.Spec.IPNetworks)
		}
	}
	hs, err := ipam.New(e.cl).ListHandles(context.Background())
	if err != nil || len(hs) != 0 {
		e.t.Errorf("IPAM handles left: %+v %v", hs, err)
	}
}

// podAnnotations are a pod's annotations as the apiserver stores them.
func (e *kubeCNIEnv) podAnnotations(t testing.TB, namespace, pod string) map[string]string {
	t.Helper()
	var p struct {
		Metadata struct{ Annotations map[string]string }
	}
	if err := json.Unmarshal(e.do(t, http.MethodGet, "/api/v1/namespaces/"+namespace+"/pods/"+pod, nil, http.StatusOK), &p); err != nil {
		t.Fatal(err)
	}
	return p.Metadata.Annotations
}

// wantPodAddress checks, on Kubernetes, Calico's annotations of an added
// pod (its container and address) and the endpoint the backend derives
// from them; on etcd, the endpoint's address.
func (e *kubeCNIEnv) wantPodAddress(t *testing.T, rt *libcni.RuntimeConf, namespace, pod, ip string) {
	t.Helper()
	if e.ds == onKube {
		an := e.podAnnotations(t, namespace, pod)
		if an["cni.projectcalico.org/containerID"] != rt.ContainerID || an["cni.projectcalico.org/podIP"] != ip+"/32" || an["cni.projectcalico.org/podIPs"] != ip+"/32" {
			t.Errorf("pod %s/%s annotations %v, want container %s and address %s/32", namespace, pod, an, rt.ContainerID, ip)
		}
	}
	if w := e.endpoint(t, namespace, pod); len(w.Spec.IPNetworks) != 1 || w.Spec.IPNetworks[0] != ip+"/32" || w.Spec.ContainerID != rt.ContainerID {
		t.Errorf("endpoint of %s/%s: container %s addresses %v, want %s and %s/32", namespace, pod, w.Spec.ContainerID, w.Spec.IPNetworks, rt.ContainerID, ip)
	}
}

// wantPodCleared checks, on Kubernetes, that DEL emptied the pod's address
// annotations (the containerID stays, as Calico's).
func (e *kubeCNIEnv) wantPodCleared(t *testing.T, rt *libcni.RuntimeConf, namespace, pod string) {
	t.Helper()
	if e.ds != onKube {
		return
	}
	an := e.podAnnotations(t, namespace, pod)
	if an["cni.projectcalico.org/containerID"] != rt.ContainerID || an["cni.projectcalico.org/podIP"] != "" || an["cni.projectcalico.org/podIPs"] != "" {
		t.Errorf("pod %s/%s annotations after DEL %v, want podIP and podIPs empty, containerID %s", namespace, pod, an, rt.ContainerID)
	}
}

// TestCNIKDDVerbs: on the Kubernetes datastore, ADD and DEL are refused
// with Calico's exact messages while ClusterInformation is missing or not
// ready; STATUS passes; CHECK passes for an added pod; GC
// releases what no valid attachment holds and empties its pod's address
// annotations; an older sandbox's DEL after a newer sandbox's ADD leaves
// the newer one's address.
func TestCNIKDDVerbs(t *testing.T) {
	t.Parallel()
	e := newKubeCNIEnvOn(t, 251, onKube)
	ctx := context.Background()
	e.pool("default-ipv4-ippool", "10.244.0.0/16")
	e.create(t, "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
	for _, pod := range []string{"web-1", "web-2", "web-3"} {
		e.createPod(t, "shop", pod, "", nil, nil)
	}
	l := e.conflistV("1.1.0", e.kubeconfig, "", `{"type":"calico-ipam"}`)

	k, _ := api.LookupKind("ClusterInformation")
	if _, err := e.cl.DeleteResource(ctx, k, "", "default", ""); err != nil {
		t.Fatal(err)
	}
	e.addFails(t, l, podRuntime(t, "shop", "web-3"), `error getting ClusterInformation: resource does not exist: ClusterInformation(default) with error: clusterinformations.crd.projectcalico.org "default" not found`)
	e.clusterReady(t, false)
	e.addFails(t, l, podRuntime(t, "shop", "web-3"), "Calico is currently not ready to process requests")
	if err := e.del(l, podRuntime(t, "shop", "web-3")); err == nil || !strings.Contains(err.Error(), "Calico is currently not ready to process requests") {
		t.Errorf("DEL while not ready: %v", err)
	}
	e.clusterReady(t, true)

	// STATUS: a pool serves the node.
	if err := e.inHost(func() error { return e.cfg.GetStatusNetworkList(ctx, l) }); err != nil {
		t.Errorf("STATUS: %v", err)
	}
	web1, web2 := podRuntime(t, "shop", "web-1"), podRuntime(t, "shop", "web-2")
	ip1, ip2 := e.addOK(t, l, web1), e.addOK(t, l, web2)
	for _, rt := range []*libcni.RuntimeConf{web1, web2} {
		if err := e.inHost(func() error { return e.cfg.CheckNetworkList(ctx, l, rt) }); err != nil {
			t.Errorf("CHECK %s: %v", rt.ContainerID, err)
		}
	}
	// web-2 is no longer a valid attachment: GC releases it and empties
	// its pod's addresses, web-1 keeps its own.
	gc := &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: web1.ContainerID, IfName: "eth0"}}}
	if err := e.inHost(func() error { return e.cfg.GCNetworkList(ctx, l, gc) }); err != nil {
		t.Fatalf("GC: %v", err)
	}
	e.wantPodAddress(t, web1, "shop", "web-1", ip1)
	e.wantPodCleared(t, web2, "shop", "web-2")
	if hs, err := ipam.New(e.cl).ListHandles(ctx); err != nil || len(hs) != 1 || hs[0].ID != "k8s-pod-network."+web1.ContainerID {
		t.Errorf("handles after GC: %+v %v, want web-1's only (web-2 had %s)", hs, err, ip2)
	}
	for _, rt := range []*libcni.RuntimeConf{web1, web2} {
		if err := e.del(l, rt); err != nil {
			t.Errorf("DEL %s: %v", rt.ContainerID, err)
		}
	}
	e.assertClean()

	// A new sandbox of web-3 is added before the old one is deleted: the
	// old one's DEL leaves the new one's annotations and address.
	older, newer := podRuntime(t, "shop", "web-3"), podRuntime(t, "shop", "web-3")
	newer.ContainerID = older.ContainerID + "-new"
	e.addOK(t, l, older)
	ip := e.addOK(t, l, newer)
	if err := e.del(l, older); err != nil {
		t.Fatalf("DEL of the older sandbox: %v", err)
	}
	e.wantPodAddress(t, newer, "shop", "web-3", ip)
	if err := e.del(l, newer); err != nil {
		t.Fatalf("DEL of the newer sandbox: %v", err)
	}
	e.wantPodCleared(t, newer, "shop", "web-3")
	e.assertClean()
}

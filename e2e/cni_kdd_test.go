package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/containernetworking/cni/libcni"

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

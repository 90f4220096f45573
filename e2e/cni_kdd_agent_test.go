package e2e

import (
	"net/http"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// The CNI suites that need calico-node run on both datastores: these
// start the agent on a kubeCNIEnv's own datastore.

// startAgent runs calico-node for node in e's host namespace on e's
// datastore. On Kubernetes it first creates the node's Kubernetes Node
// when there is none (the agent registers on it), and the agent reaches
// the API through the host namespace's relay.
func (e *kubeCNIEnv) startAgent(node string, extra ...string) *agentProc {
	e.t.Helper()
	if e.ds != onKube {
		return e.cniEnv.startAgent(node, extra...)
	}
	if code, _ := e.api.Do(e.t, http.MethodGet, "/api/v1/nodes/"+node, nil); code == http.StatusNotFound {
		e.kddNode(e.t, node)
	}
	return e.startKDDAgent(e.t, e.host.ns, node, e.kubeconfig, e.state, extra...)
}

// servePath is cniEnv.servePath with the agent on e's datastore.
func (e *kubeCNIEnv) servePath(path cniPath, node string) *agentProc {
	if path != viaAgent {
		return nil
	}
	e.t.Helper()
	a := e.startAgent(node)
	a.mustServe(e.t, node)
	return a
}

// forEachDatastore runs f as parallel subtests "etcdv3" and "kubernetes",
// each on a kubeCNIEnv of its own (its host index from hosts).
func forEachDatastore(t *testing.T, hosts map[datastore]int, f func(t *testing.T, e *kubeCNIEnv)) {
	for _, ds := range []datastore{onEtcd, onKube} {
		t.Run(string(ds), func(t *testing.T) {
			t.Parallel()
			f(t, newKubeCNIEnvOn(t, hosts[ds], ds))
		})
	}
}

// setPodQoS changes a pod's QoS controls while it runs: on etcd by editing
// its endpoint, as an orchestrator would; on Kubernetes, where the endpoint
// is derived from the pod, by changing the pod's QoS annotations (a nil
// value removes one), as a user would.
func (e *kubeCNIEnv) setPodQoS(p pod, annotations map[string]any, q *api.QoSControls) {
	e.t.Helper()
	if e.ds != onKube {
		e.editEndpoint(p, func(w *api.WorkloadEndpoint) { w.Spec.QoSControls = q })
		return
	}
	w := e.endpointOf(p)
	e.do(e.t, http.MethodPatch, "/api/v1/namespaces/"+w.Metadata.Namespace+"/pods/"+w.Spec.Pod,
		map[string]any{"metadata": map[string]any{"annotations": annotations}}, http.StatusOK)
}

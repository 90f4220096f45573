package cni

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/apiconfig"
)

// On the Kubernetes datastore (datastore_type kubernetes) the plugin works
// as Calico's does there: a pod's WorkloadEndpoint is its Pod, so the
// endpoint write is a patch of the pod's Calico annotations
// (store/kube), profiles are derived from Namespaces and ServiceAccounts
// and never written, and every ADD and DEL first asks ClusterInformation
// whether the datastore is ready.

// Calico's refusals, matched by users and scripts (recorded from Calico
// v3.32.1: compat/kdd/api-calls.json).
const (
	msgNotReady             = "Calico is currently not ready to process requests"
	msgClusterInfoNotExists = `error getting ClusterInformation: resource does not exist: ClusterInformation(default) with error: clusterinformations.crd.projectcalico.org "default" not found`
)

var clusterInfoKind, _ = api.LookupKind("ClusterInformation")

// kdd: the session's datastore is Kubernetes.
func (s *session) kdd() bool { return s.ds != nil && s.ds.Type == apiconfig.Kubernetes }

// kddReady is what Calico's plugin checks before an ADD or DEL on the
// Kubernetes datastore: a workload that is a Kubernetes pod (an endpoint
// there is a pod's), and ClusterInformation default saying the datastore
// is ready. On etcd it checks nothing.
func (s *session) kddReady(ctx context.Context, id identity) error {
	if !s.kdd() {
		return nil
	}
	if id.orchestrator != OrchestratorK8s {
		return types.NewError(types.ErrInvalidNetworkConfig, "invalid network config: datastore_type kubernetes: "+
			"a workload's endpoint is its Kubernetes pod, so CNI_ARGS must name one (K8S_POD_NAMESPACE and K8S_POD_NAME)", "")
	}
	r, err := s.cl.GetResource(ctx, clusterInfoKind, "", "default")
	switch {
	case errors.Is(err, store.ErrNotFound):
		return types.NewError(types.ErrInternal, msgClusterInfoNotExists, "")
	case err != nil:
		return types.NewError(types.ErrTryAgainLater, "error getting ClusterInformation: "+err.Error(), "")
	}
	if ci := r.(*api.ClusterInformation); ci.Spec.DatastoreReady == nil || !*ci.Spec.DatastoreReady {
		return types.NewError(types.ErrInternal, msgNotReady, "")
	}
	return nil
}

// storedEndpoint is the endpoint as written to the datastore. On
// Kubernetes the pod carries no MAC (Calico's endpoint there has none; the
// CNI result still reports the pod interface's).
func (s *session) storedEndpoint(wep *api.WorkloadEndpoint) *api.WorkloadEndpoint {
	if !s.kdd() {
		return wep
	}
	w := *wep
	w.Spec.MAC = ""
	return &w
}

// addressed: on Kubernetes a pod's endpoint exists as long as the pod; it
// has addresses only between its ADD and DEL.
func addressed(wep *api.WorkloadEndpoint) bool { return len(wep.Spec.IPNetworks) > 0 }

// addReads are an ADD's first reads, in the order the ADD looks at them:
// the datastore's readiness, the container's existing endpoint, the pod
// and its namespace.
type addReads struct {
	ready    func() error
	existing func() (*api.WorkloadEndpoint, error)
	pod      func() (*kubePod, error)
}

// firstReads: on Kubernetes an ADD's first reads (ClusterInformation, the
// pod's endpoint, the pod and its namespace, and the IPAM's first read,
// ipam.Allocator.Prefetch) do not depend on each other and only read, so
// they go out at once: one round trip to the API instead of four. The ADD
// still looks at their outcomes in turn, so what it reports does not
// change; a read it never looks at is wasted, not harmful. For a workload
// that is not a Kubernetes pod on Kubernetes each read is made when it is
// looked at.
//
// On both datastores the pod, its namespace and its endpoint may be read
// from the apiserver's watch cache (store.RecentReads: about a tenth of a
// consistent read's time, no etcd read behind it), and the IPAM's snapshot
// is too (ipam/prefetch.go). The kubelet itself learnt of the pod from
// that cache before it called the plugin; what the ADD decides from these
// is safe on a slightly old answer: a missing object is read again at the
// latest, an endpoint found is trusted only once its veth is seen wired,
// and none found costs an idempotent ADD (the handle keeps one allocation
// per container). ClusterInformation is read at the latest: `calicoctl
// datastore migrate lock` stops ADDs with it.
//
// On etcd the same reads (ClusterInformation for the migration lock, the
// endpoint, the IPAM's snapshot, at the latest: etcd has no older copy to
// serve) go out at once too, each its own etcd round trip; the pod and
// namespace, for a Kubernetes pod, from the apiserver with them.
func (s *session) firstReads(ctx context.Context, stdin []byte, id identity) addReads {
	recent := store.RecentReads(ctx)
	r := addReads{
		ready:    func() error { return s.ready(ctx, id) },
		existing: func() (*api.WorkloadEndpoint, error) { return s.existingEndpoint(recent, id) },
		pod:      func() (*kubePod, error) { return s.readKubePod(recent, stdin, id) },
	}
	if s.kdd() && !s.usesKubernetes(id) {
		return r
	}
	ready := inBackground(func() (struct{}, error) { return struct{}{}, r.ready() })
	if s.conf.IPAM.Type == "calico-ipam" {
		pre := ctx // etcd: every read is the latest
		if s.kdd() {
			pre = recent
		}
		s.al.Prefetch(pre, s.node, handleID(s.conf.Name, id.containerID))
	}
	out := addReads{ready: func() error { _, err := ready(); return err }, existing: inBackground(r.existing), pod: r.pod}
	if s.usesKubernetes(id) {
		out.pod = inBackground(r.pod)
	}
	return out
}

// ready is the check before an ADD writes anything: on Kubernetes
// Calico's (kddReady), on etcd the migration lock (etcdLocked).
func (s *session) ready(ctx context.Context, id identity) error {
	if err := s.kddReady(ctx, id); err != nil {
		return err
	}
	return s.etcdLocked(ctx, false)
}

// inBackground starts f and returns what waits for its outcome.
func inBackground[T any](f func() (T, error)) func() (T, error) {
	var v T
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		v, err = f()
	}()
	return func() (T, error) {
		<-done
		return v, err
	}
}

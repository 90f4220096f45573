// Package kube is the Kubernetes API backend: Calico's model as
// crd.projectcalico.org/v1 custom resources (or, where the cluster serves
// Calico's native projectcalico.org/v3 CRDs, as those: group.go), compare-and-swap on
// resourceVersion, watches that resume (DESIGN.md section 4,
// docs/DATASTORE.md).
//
// Read first:
//   - backend.go: the Backend (model.Backend on client-go's dynamic client,
//     shared with package k8s) and where each model key lives (ref).
//   - convert.go: model JSON to custom resources and back, through
//     store/kdd, so the objects in the API server are exactly Calico's.
//   - ops.go: get, read-many, create, update, delete and Commit (one object
//     at a time, in order, stopping at the first failure: not atomic).
//   - list.go, watch.go: lists by page; a watch lists, then follows from
//     the list's resourceVersion; a dropped watch resumes from the last
//     resourceVersion seen; only 410 Gone re-lists and delivers the
//     difference.
//   - source.go, derived.go, nodewrite.go, wepwrite.go: the kinds Calico
//     derives from Kubernetes objects (Node, WorkloadEndpoint, Profile),
//     read through store/kdd's derivations; a Node update is written as
//     Calico's annotations on the Kubernetes Node, a WorkloadEndpoint
//     write as the CNI plugin's pod status patch.
//
// A model revision is the custom resource's (or Kubernetes object's)
// resourceVersion.
package kube

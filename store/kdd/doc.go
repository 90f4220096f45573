// Package kdd holds the crd.projectcalico.org/v1 shapes of Calico's model:
// conversion between the model JSON the etcd backend stores and the custom
// resources Calico writes in Kubernetes datastore mode.
//
// Everything here is pure: no client-go, no I/O. The facts matched are real
// Calico v3.32.1's, recorded in testdata/objects.json.
//
//   - Resource kinds (kinds.go, resource.go): the model is the v3 object
//     {"kind","apiVersion":"projectcalico.org/v3","metadata","spec"} without
//     resourceVersion. The custom resource has the same kind and name, the
//     labels containing "projectcalico.org/", and the whole v3 metadata in
//     the projectcalico.org/metadata annotation (meta.go: Kubernetes' key
//     order, the name only for tiered policies). Its uid is the model's with
//     each byte's bits reversed (names.go).
//   - IPAM kinds (ipamcr.go, affinitycr.go): the models are the etcd values
//     (ipam/block.go, handle.go, config.go); the custom resources carry them
//     under Calico's CRD field names, named by BlockName, AffinityName,
//     HandleName and IPAMConfigName.
//   - On a cluster with Calico's native projectcalico.org/v3 CRDs (v3.go)
//     the custom resource of a resource kind is the model object itself;
//     the IPAM kinds are not served there.
//   - Derived kinds: a Calico Node from a Kubernetes Node and its
//     projectcalico.org/* annotations (node.go); WorkloadEndpoints and
//     Profiles from Pods, Namespaces and ServiceAccounts are in
//     store/kdd/derive, which reuses the k8s package.
package kdd

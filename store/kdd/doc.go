// Package kdd holds the crd.projectcalico.org/v1 shapes of Calico's model:
// conversion between the model JSON the etcd backend stores and the custom
// resources Calico writes in Kubernetes datastore mode.
//
// Everything here is pure: no client-go, no I/O. A resource kind's model is
// the v3 object {"kind","apiVersion":"projectcalico.org/v3","metadata","spec"}
// without resourceVersion (ModelToCR, CRToModel); the IPAM kinds' models are
// the etcd values (block.go, affinity, handle and config in ipamcr.go). The
// facts matched are real Calico v3.32.1's, recorded in testdata/objects.json.
package kdd

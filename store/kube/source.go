package kube

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/calico-aio/calico-aio/store/kdd"
	"github.com/calico-aio/calico-aio/store/kdd/derive"
	"github.com/calico-aio/calico-aio/store/model"
)

// source is the API resource a kind's objects are read from, and how one
// of its objects converts to the model: ok is false for an object that
// has no model object (a pod not on a node).
type source struct {
	kind    kdd.Kind
	gvr     schema.GroupVersionResource
	convert func(u *unstructured.Unstructured) (o model.Object, uid string, ok bool, err error)
}

var (
	nodesGVR           = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	podsGVR            = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	namespacesGVR      = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	serviceAccountsGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
)

// sourceOf is where kind is read from: a custom resource of group g, or
// for a derived kind (g unused) a core resource. Profiles come from two
// resources (profiles.go) and have none.
func sourceOf(k kdd.Kind, g kdd.APIGroup) (source, error) {
	switch {
	case k.Storage != kdd.Derived:
		return source{kind: k, gvr: gvrOf(k, g), convert: func(u *unstructured.Unstructured) (model.Object, string, bool, error) {
			o, uid, err := fromCR(k, g, u)
			return o, uid, true, err
		}}, nil
	case k.Kind == "Node":
		return source{kind: k, gvr: nodesGVR, convert: derivedFrom(k, func(b []byte) (kdd.Read, bool, error) {
			r, err := kdd.NodeFromK8s(b)
			return r, true, err
		})}, nil
	case k.Kind == "WorkloadEndpoint":
		return source{kind: k, gvr: podsGVR, convert: derivedFrom(k, derive.PodToWorkloadEndpoint)}, nil
	}
	return source{}, fmt.Errorf("kind %s: derived from several Kubernetes resources; read it by name or list it", k.Kind)
}

// derivedFrom makes a source's conversion from a pure derivation of the
// Kubernetes object's JSON.
func derivedFrom(k kdd.Kind, derive func([]byte) (kdd.Read, bool, error)) func(*unstructured.Unstructured) (model.Object, string, bool, error) {
	return func(u *unstructured.Unstructured) (model.Object, string, bool, error) {
		b, err := u.MarshalJSON()
		if err != nil {
			return model.Object{}, "", false, err
		}
		r, ok, err := derive(b)
		if err != nil || !ok {
			return model.Object{}, "", ok, err
		}
		o, uid, err := objectOf(model.Key{Kind: k.Kind, Namespace: r.Namespace, Name: r.Name}, r, nil)
		return o, uid, true, err
	}
}

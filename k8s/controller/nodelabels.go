package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// Node labels, as Calico's kube-controllers node controller syncs them in
// etcd mode: every label of a Kubernetes node is copied onto the Calico
// Node whose k8s orchRef names it (so IP pool and BGP peer nodeSelectors
// can use them), and the labels copied are recorded, as JSON, in the
// annotation kubeLabelsAnnotation. A label removed from the Kubernetes
// node is removed from the Calico Node only when the annotation says it
// was copied: labels set on the Calico Node by hand (calicoctl) stay,
// unless Kubernetes sets the same key, whose value wins.

// kubeLabelsAnnotation records the Kubernetes labels last copied.
const kubeLabelsAnnotation = "projectcalico.org/kube-labels"

// groupNodeLabels is the Calico Nodes' labels: Kubernetes nodes. A bit of
// its own, far from the iota groups in controller.go.
const groupNodeLabels group = 1 << 16

// syncNodeLabels copies each Kubernetes node's labels onto its Calico
// Node. Calico Nodes without a k8s orchRef, or whose Kubernetes node is
// missing, are left alone (the latter to the node garbage collection).
func (c *Controller) syncNodeLabels(ctx context.Context) error {
	rs, _, err := c.store.ListResources(ctx, nodeKind, "")
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	kns, err := c.kube.ListNodes(ctx)
	if err != nil {
		return err
	}
	byName := make(map[string]*k8s.Node, len(kns))
	for i := range kns {
		byName[kns[i].Metadata.Name] = &kns[i]
	}
	var errs []error
	for _, r := range rs {
		n := r.(*api.Node)
		kn := byName[k8sNodeRef(n)]
		if kn == nil {
			continue
		}
		if err := c.setNodeLabels(ctx, n, kn.Metadata.Labels); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// nodeLabelsFor is n's metadata with the Kubernetes labels kube applied:
// labels and the annotation recording them; an error when the recorded
// annotation cannot be read (nothing is changed then, as in Calico).
func nodeLabelsFor(m api.ObjectMeta, kube map[string]string) (labels, annotations map[string]string, err error) {
	labels, annotations = maps.Clone(m.Labels), maps.Clone(m.Annotations)
	if labels == nil {
		labels = map[string]string{}
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	old := map[string]string{}
	if a, ok := annotations[kubeLabelsAnnotation]; ok {
		if err := json.Unmarshal([]byte(a), &old); err != nil {
			return nil, nil, fmt.Errorf("annotation %s is not a JSON object of labels: %w", kubeLabelsAnnotation, err)
		}
	}
	for k := range old {
		if _, still := kube[k]; !still {
			delete(labels, k)
		}
	}
	maps.Copy(labels, kube)
	if kube == nil {
		kube = map[string]string{}
	}
	b, _ := json.Marshal(kube) // keys sorted: the same labels, the same text
	annotations[kubeLabelsAnnotation] = string(b)
	if len(labels) == 0 {
		labels = nil
	}
	return labels, annotations, nil
}

// setNodeLabels writes n's labels and annotation for kube when they
// differ, with a compare-and-swap on n's revision, re-reading n after a
// conflict.
func (c *Controller) setNodeLabels(ctx context.Context, n *api.Node, kube map[string]string) error {
	for range maxLabelAttempts {
		labels, annotations, err := nodeLabelsFor(n.Metadata, kube)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Metadata.Name, err)
		}
		if maps.Equal(labels, n.Metadata.Labels) && maps.Equal(annotations, n.Metadata.Annotations) {
			return nil
		}
		next := *n
		next.Metadata.Labels, next.Metadata.Annotations = labels, annotations
		_, err = c.store.UpdateResource(ctx, &next)
		if err == nil {
			c.logf("kube-controllers: synced the labels of node %s from Kubernetes node %s", n.Metadata.Name, k8sNodeRef(n))
			return nil
		}
		if errors.Is(err, store.ErrNotFound) {
			return nil // deleted meanwhile
		}
		if !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("updating labels of node %s: %w", n.Metadata.Name, err)
		}
		r, err := c.store.GetResource(ctx, nodeKind, "", n.Metadata.Name)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("re-reading node %s: %w", n.Metadata.Name, err)
		}
		n = r.(*api.Node)
	}
	return fmt.Errorf("updating labels of node %s: gave up after %d conflicting attempts", n.Metadata.Name, maxLabelAttempts)
}

package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// maxLabelAttempts bounds the compare-and-swap retries of one endpoint.
const maxLabelAttempts = 5

// podKey names a pod: namespace and name.
type podKey struct{ ns, name string }

func (p podKey) String() string { return p.ns + "/" + p.name }

// k8sPodOf is the pod a workload endpoint belongs to (ok false when it is
// not a Kubernetes pod's).
func k8sPodOf(w *api.WorkloadEndpoint) (podKey, bool) {
	if w.Spec.Orchestrator != k8s.OrchestratorK8s || w.Spec.Pod == "" {
		return podKey{}, false
	}
	return podKey{w.Metadata.Namespace, w.Spec.Pod}, true
}

// listK8sEndpoints reads every Kubernetes pod's workload endpoint.
func (c *Controller) listK8sEndpoints(ctx context.Context) ([]*api.WorkloadEndpoint, error) {
	rs, _, err := c.store.ListResources(ctx, wepKind, "")
	if err != nil {
		return nil, fmt.Errorf("listing workloadendpoints: %w", err)
	}
	var out []*api.WorkloadEndpoint
	for _, r := range rs {
		if w := r.(*api.WorkloadEndpoint); w.Spec.Orchestrator == k8s.OrchestratorK8s && w.Spec.Pod != "" {
			out = append(out, w)
		}
	}
	return out, nil
}

// syncPodLabels makes the labels of each Kubernetes endpoint whose pod
// exists what the CNI plugin gives it (k8s.PodLabels), touching nothing
// else. Endpoints of missing pods are left to the garbage collector.
func (c *Controller) syncPodLabels(ctx context.Context) error {
	weps, err := c.listK8sEndpoints(ctx)
	if err != nil {
		return err
	}
	pods, err := c.kube.ListPods(ctx)
	if err != nil {
		return err
	}
	byKey := make(map[podKey]*k8s.Pod, len(pods))
	for i := range pods {
		byKey[podKey{pods[i].Metadata.Namespace, pods[i].Metadata.Name}] = &pods[i]
	}
	var errs []error
	for _, w := range weps {
		pk, _ := k8sPodOf(w)
		pod := byKey[pk]
		if pod == nil {
			continue
		}
		if err := c.setLabels(ctx, w, k8s.PodLabels(*pod)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// setLabels makes w's labels want (as the store defaults them), with a
// compare-and-swap on w's revision, re-reading w after a conflict.
func (c *Controller) setLabels(ctx context.Context, w *api.WorkloadEndpoint, want map[string]string) error {
	for range maxLabelAttempts {
		next := *w
		next.Metadata.Labels = maps.Clone(want)
		next.Default() // the labels the store would keep
		if maps.Equal(w.Metadata.Labels, next.Metadata.Labels) {
			return nil
		}
		_, err := c.store.UpdateResource(ctx, &next)
		if err == nil {
			c.logf("kube-controllers: updated labels of workloadendpoint %s/%s from pod %s", w.Metadata.Namespace, w.Metadata.Name, w.Spec.Pod)
			return nil
		}
		if errors.Is(err, store.ErrNotFound) {
			return nil // deleted meanwhile: nothing to label
		}
		if !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("updating labels of workloadendpoint %s/%s: %w", w.Metadata.Namespace, w.Metadata.Name, err)
		}
		r, err := c.store.GetResource(ctx, wepKind, w.Metadata.Namespace, w.Metadata.Name)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("re-reading workloadendpoint %s/%s: %w", w.Metadata.Namespace, w.Metadata.Name, err)
		}
		w = r.(*api.WorkloadEndpoint)
	}
	return fmt.Errorf("updating labels of workloadendpoint %s/%s: gave up after %d conflicting attempts", w.Metadata.Namespace, w.Metadata.Name, maxLabelAttempts)
}

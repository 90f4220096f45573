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

// syncPodLabels makes the labels and QoS controls of each Kubernetes
// endpoint whose pod exists what the CNI plugin gives it (k8s.PodLabels,
// k8s.PodQoS), touching nothing else, so that a pod's labels and QoS
// annotations changed after ADD reach its endpoint. A QoS annotation
// refused there keeps the endpoint's qosControls as they are, and is
// logged. Endpoints of missing pods are left to the garbage collector.
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
		want := fromPod{labels: k8s.PodLabels(*pod), qos: w.Spec.QoSControls}
		if q, err := k8s.PodQoS(pod.Metadata.Annotations); err != nil {
			c.logf("kube-controllers: pod %s: %v; its workloadendpoint keeps its qosControls", pk, err)
		} else {
			want.qos = q
		}
		if err := c.setFromPod(ctx, w, want); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fromPod is what an endpoint takes from its pod.
type fromPod struct {
	labels map[string]string
	qos    *api.QoSControls
}

func sameQoS(a, b *api.QoSControls) bool {
	return a == b || a != nil && b != nil && *a == *b
}

// setFromPod makes w's labels (as the store defaults them) and QoS
// controls want's, with a compare-and-swap on w's revision, re-reading w
// after a conflict.
func (c *Controller) setFromPod(ctx context.Context, w *api.WorkloadEndpoint, want fromPod) error {
	for range maxLabelAttempts {
		next := *w
		next.Metadata.Labels = maps.Clone(want.labels)
		next.Spec.QoSControls = want.qos
		next.Default() // the labels the store would keep
		if maps.Equal(w.Metadata.Labels, next.Metadata.Labels) && sameQoS(w.Spec.QoSControls, next.Spec.QoSControls) {
			return nil
		}
		_, err := c.store.UpdateResource(ctx, &next)
		if err == nil {
			c.logf("kube-controllers: updated labels and qosControls of workloadendpoint %s/%s from pod %s", w.Metadata.Namespace, w.Metadata.Name, w.Spec.Pod)
			return nil
		}
		if errors.Is(err, store.ErrNotFound) {
			return nil // deleted meanwhile: nothing to update
		}
		if !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("updating workloadendpoint %s/%s from its pod: %w", w.Metadata.Namespace, w.Metadata.Name, err)
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
	return fmt.Errorf("updating workloadendpoint %s/%s from its pod: gave up after %d conflicting attempts", w.Metadata.Namespace, w.Metadata.Name, maxLabelAttempts)
}

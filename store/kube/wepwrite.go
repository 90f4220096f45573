package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/calico-aio/calico-aio/store/kdd/derive"
	"github.com/calico-aio/calico-aio/store/model"
)

// A WorkloadEndpoint in the Kubernetes datastore is its Pod: writing one
// is what Calico's CNI plugin does, a strategic-merge patch of
// pods/<pod>/status with Calico's annotations (containerID, podIP,
// podIPs), and deleting one empties podIP and podIPs. Only what the pod
// then derives to (store/kdd/derive) can be written: any other field is
// refused by name, never stored and ignored.

// endpointPod is the pod a WorkloadEndpoint key names.
func endpointPod(key model.Key) (string, error) {
	_, pod, _, ok := splitEndpointName(key.Name)
	if key.Namespace == "" || key.Node != "" || !ok {
		return "", fmt.Errorf("%s: not a Kubernetes pod's WorkloadEndpoint (<node>-k8s-<pod>-<interface>, namespaced)", key)
	}
	return pod, nil
}

// writeEndpoint patches the endpoint's pod with Calico's annotations: the
// value's containerID and ipNetworks. At rev (an update), the pod must
// still be at that resourceVersion; a create has no precondition, as
// Calico's. The pod is read first, unless it was just read (podmemo.go),
// to refuse what it cannot represent before anything is written.
func (b *Backend) writeEndpoint(ctx context.Context, key model.Key, value []byte, rev model.Revision) (model.Revision, error) {
	pod, err := endpointPod(key)
	if err != nil {
		return "", err
	}
	var w struct {
		Metadata struct{ Name, Namespace string }
		Spec     struct {
			ContainerID string   `json:"containerID"`
			IPNetworks  []string `json:"ipNetworks"`
		}
	}
	if err := json.Unmarshal(value, &w); err != nil || w.Metadata.Name != key.Name || w.Metadata.Namespace != key.Namespace {
		return "", fmt.Errorf("%s: the value is not the key's WorkloadEndpoint (metadata %s/%s, %v)", key, w.Metadata.Namespace, w.Metadata.Name, err)
	}
	ips := make([]netip.Prefix, 0, len(w.Spec.IPNetworks))
	for _, s := range w.Spec.IPNetworks {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return "", fmt.Errorf("%s: spec.ipNetworks: %w", key, err)
		}
		ips = append(ips, p)
	}
	patch, err := derive.AddPatch(w.Spec.ContainerID, ips)
	if err != nil {
		return "", err
	}
	pods := b.dyn.Resource(podsGVR).Namespace(key.Namespace)
	u := b.recentPod(key.Namespace, pod, string(rev))
	if u == nil {
		if u, err = pods.Get(ctx, pod, metav1.GetOptions{}); err != nil {
			return "", b.podError("get", key, rev, err)
		}
	}
	if rev != "" {
		if u.GetResourceVersion() != string(rev) {
			return "", &model.ConflictError{Key: key, Expected: rev}
		}
		if patch, err = withPreconditions(patch, string(rev), ""); err != nil {
			return "", err
		}
	}
	if err := b.representable(key, value, u, w.Spec.ContainerID, ips); err != nil {
		return "", err
	}
	out, err := pods.Patch(ctx, pod, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return "", b.podError("patch", key, rev, err)
	}
	b.sawUID(kindWEP, key.Namespace, pod, out.GetResourceVersion(), string(out.GetUID()))
	return model.Revision(out.GetResourceVersion()), nil
}

// deleteEndpoint empties the pod's podIP and podIPs (the containerID
// stays), on the condition that the pod is still the one read: at rev
// when given (with the uid seen at rev), else as read now, as Calico's
// plugin does (GET the pod, PATCH with its resourceVersion and uid).
func (b *Backend) deleteEndpoint(ctx context.Context, key model.Key, rev model.Revision) error {
	pod, err := endpointPod(key)
	if err != nil {
		return err
	}
	if rev != "" {
		if err := checkRevision(rev); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	pods := b.dyn.Resource(podsGVR).Namespace(key.Namespace)
	rv, uid := string(rev), b.seenUID(kindWEP, key.Namespace, pod, string(rev))
	if uid == "" {
		u, err := pods.Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return b.podError("get", key, rev, err)
		}
		if rev != "" && u.GetResourceVersion() != rv {
			return &model.ConflictError{Key: key, Expected: rev}
		}
		rv, uid = u.GetResourceVersion(), string(u.GetUID())
	}
	patch, err := derive.DelPatch(rv, uid)
	if err != nil {
		return err
	}
	out, err := pods.Patch(ctx, pod, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return b.podError("patch", key, model.Revision(rv), err)
	}
	b.sawUID(kindWEP, key.Namespace, pod, out.GetResourceVersion(), string(out.GetUID()))
	return nil
}

// podError is an API error about an endpoint's pod: a missing pod is the
// endpoint's NotFound.
func (b *Backend) podError(op string, key model.Key, rev model.Revision, err error) error {
	e := b.apiError(op, key, rev, err)
	if _, ok := e.(*model.NotFoundError); ok {
		return fmt.Errorf("%s: its Pod does not exist (a WorkloadEndpoint in the Kubernetes datastore is derived from its Pod): %w", key, e)
	}
	return e
}

// withPreconditions adds a resourceVersion (and uid) precondition to a
// pod status patch.
func withPreconditions(patch []byte, rv, uid string) ([]byte, error) {
	var p map[string]map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	p["metadata"]["resourceVersion"] = rv
	if uid != "" {
		p["metadata"]["uid"] = uid
	}
	return json.Marshal(p)
}

// representable is nil when the pod, patched with containerID and ips,
// derives to the written endpoint; else an error naming the first field
// that would not read back as written. Server-set metadata
// (resourceVersion, uid, creationTimestamp) is not compared.
func (b *Backend) representable(key model.Key, value []byte, pod *unstructured.Unstructured, containerID string, ips []netip.Prefix) error {
	p := pod.DeepCopy()
	ann := p.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	strs := make([]string, len(ips))
	for i, ip := range ips {
		strs[i] = ip.String()
	}
	ann[derive.AnnotationContainerID] = containerID
	ann[derive.AnnotationPodIPs] = strings.Join(strs, ",")
	ann[derive.AnnotationPodIP] = ""
	if len(strs) > 0 {
		ann[derive.AnnotationPodIP] = strs[0]
	}
	p.SetAnnotations(ann)
	raw, err := p.MarshalJSON()
	if err != nil {
		return err
	}
	r, ok, err := derive.PodToWorkloadEndpoint(raw)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", key, err)
	case !ok:
		return fmt.Errorf("%s: pod %s/%s has no WorkloadEndpoint (it is not on a node, or uses the host's network)", key, key.Namespace, p.GetName())
	}
	var got, want map[string]any
	if err := json.Unmarshal(value, &got); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	if err := json.Unmarshal(r.Model, &want); err != nil {
		return err
	}
	for _, m := range []map[string]any{got, want} {
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "resourceVersion")
			delete(md, "uid")
			delete(md, "creationTimestamp")
		}
	}
	if path, have, derived := firstDifference("", got, want); path != "" {
		return fmt.Errorf("%s: field %s cannot be stored in the Kubernetes datastore: the endpoint is derived from pod %s/%s, which gives %s, not %s",
			key, path, key.Namespace, p.GetName(), jsonOrNone(derived), jsonOrNone(have))
	}
	return nil
}

// firstDifference is the first path (in key order) at which a and b
// differ, treating empty values as absent, with the two values there.
func firstDifference(path string, a, b any) (string, any, any) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := make([]string, 0, len(am)+len(bm))
		for k := range am {
			keys = append(keys, k)
		}
		for k := range bm {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range slices.Compact(keys) {
			sub := k
			if path != "" {
				sub = path + "." + k
			}
			if p, x, y := firstDifference(sub, am[k], bm[k]); p != "" {
				return p, x, y
			}
		}
		return "", nil, nil
	}
	if isEmpty(a) && isEmpty(b) || reflect.DeepEqual(a, b) {
		return "", nil, nil
	}
	return path, a, b
}

// isEmpty: JSON null, "", false, 0, [] or {}.
func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case float64:
		return x == 0
	case []any:
		return len(x) == 0
	case map[string]any:
		for _, e := range x {
			if !isEmpty(e) {
				return false
			}
		}
		return true
	}
	return false
}

func jsonOrNone(v any) string {
	if isEmpty(v) {
		return "none"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

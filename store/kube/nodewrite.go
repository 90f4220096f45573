package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/calico-aio/calico-aio/store/kdd"
	"github.com/calico-aio/calico-aio/store/model"
)

// updateNode writes a Calico Node as Calico does in a Kubernetes
// datastore: its fields become the projectcalico.org/* annotations of the
// Kubernetes Node (store/kdd), put through nodes/<name>/status at revision
// rev; the Kubernetes Node's labels and everything else stay. What a
// Kubernetes Node cannot hold is refused by name.
func (b *Backend) updateNode(ctx context.Context, key model.Key, value []byte, rev model.Revision) (model.Revision, error) {
	if key.Namespace != "" || key.Node != "" {
		return "", fmt.Errorf("%s: not a Node key", key)
	}
	if err := checkRevision(rev); err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	var id struct{ Metadata struct{ Name string } }
	if err := json.Unmarshal(value, &id); err != nil || id.Metadata.Name != key.Name {
		return "", fmt.Errorf("%s: the value is not the key's Node (metadata.name %q, %v)", key, id.Metadata.Name, err)
	}
	anns, err := kdd.NodeAnnotations(value)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	nodes := b.dyn.Resource(nodesGVR)
	u, err := nodes.Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return "", b.apiError("get", key, "", err)
	}
	cur := u.GetAnnotations()
	if cur == nil {
		cur = map[string]string{}
	}
	for _, k := range kdd.NodeAnnotationKeys() {
		delete(cur, k)
	}
	maps.Copy(cur, anns)
	u.SetAnnotations(cur)
	u.SetResourceVersion(string(rev))
	out, err := nodes.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldValidation: fieldValidation})
	if err != nil {
		return "", b.apiError("update", key, rev, err)
	}
	return model.Revision(out.GetResourceVersion()), nil
}

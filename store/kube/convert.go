package kube

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/calico-aio/calico-aio/store/kdd"
	"github.com/calico-aio/calico-aio/store/model"
)

// crIdentity is what the backend checks of a custom resource it built.
type crIdentity struct {
	Kind     string
	Metadata struct{ Name, Namespace string }
}

// toCR converts key's model JSON to the custom resource Calico writes for
// it. rev, when set, is the revision the write replaces (an update); uid,
// when set, the custom resource's uid at that revision.
func toCR(r ref, key model.Key, value []byte, rev model.Revision, uid string) (*unstructured.Unstructured, error) {
	var existing []byte
	if rev != "" {
		var err error
		existing, err = existingMeta(r, rev, uid)
		if err != nil {
			return nil, err
		}
	}
	cr, err := convertToCR(r, key, value, existing)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	var id crIdentity
	if err := json.Unmarshal(cr, &id); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if id.Kind != r.kind.Kind || id.Metadata.Name != r.name || id.Metadata.Namespace != r.ns {
		return nil, fmt.Errorf("%s: the value is a %s named %q in namespace %q, not the key's object", key, id.Kind, id.Metadata.Name, id.Metadata.Namespace)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(cr); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return u, nil
}

// existingMeta is the stored custom resource's metadata an update keeps.
func existingMeta(r ref, rev model.Revision, uid string) ([]byte, error) {
	if err := checkRevision(rev); err != nil {
		return nil, err
	}
	meta := map[string]string{"name": r.name, "resourceVersion": string(rev)}
	if r.ns != "" {
		meta["namespace"] = r.ns
	}
	if uid != "" {
		meta["uid"] = uid
	}
	return json.Marshal(map[string]any{"metadata": meta})
}

func convertToCR(r ref, key model.Key, value, existing []byte) ([]byte, error) {
	if r.group == kdd.APIGroupV3 {
		return kdd.ModelToCRV3(value, existing)
	}
	switch r.kind.Kind {
	case kdd.KindIPAMBlock:
		return kdd.BlockToCR(value, existing)
	case kdd.KindBlockAffinity:
		return kdd.AffinityToCR(key.Node, r.cidr, value, existing)
	case kdd.KindIPAMHandle:
		return kdd.HandleToCR(key.Name, value, existing)
	case kdd.KindIPAMConfig:
		return kdd.ConfigToCR(value, existing)
	}
	return kdd.ModelToCR(value, existing)
}

// fromCR converts a custom resource of kind in group g to its model
// object, and returns the custom resource's uid.
func fromCR(kind kdd.Kind, g kdd.APIGroup, u *unstructured.Unstructured) (model.Object, string, error) {
	cr, err := u.MarshalJSON()
	if err != nil {
		return model.Object{}, "", err
	}
	var (
		r   kdd.Read
		key = model.Key{Kind: kind.Kind}
	)
	switch kind.Kind {
	case kdd.KindIPAMBlock:
		r, cidr, e := kdd.BlockFromCR(cr)
		key.Name, err = cidr.String(), e
		return objectOf(key, r, err)
	case kdd.KindBlockAffinity:
		r, node, cidr, e := kdd.AffinityFromCR(cr)
		key.Node, key.Name, err = node, cidr.String(), e
		return objectOf(key, r, err)
	case kdd.KindIPAMHandle:
		r, id, e := kdd.HandleFromCR(cr)
		key.Name, err = id, e
		return objectOf(key, r, err)
	case kdd.KindIPAMConfig:
		r, err = kdd.ConfigFromCR(cr)
	default:
		if g == kdd.APIGroupV3 {
			r, err = kdd.CRV3ToModel(cr)
		} else {
			r, err = kdd.CRToModel(cr)
		}
		key.Namespace = r.Namespace
	}
	key.Name = r.Name
	return objectOf(key, r, err)
}

func objectOf(key model.Key, r kdd.Read, err error) (model.Object, string, error) {
	if err != nil {
		return model.Object{}, r.UID, fmt.Errorf("%s %s: %w", key.Kind, r.Name, err)
	}
	return model.Object{Key: key, Value: r.Model, Revision: model.Revision(r.ResourceVersion)}, r.UID, nil
}

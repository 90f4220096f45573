package kdd

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// APIGroup is the group/version Calico's resource kinds are custom
// resources of: crd.projectcalico.org/v1 (Calico's manifest, the default)
// or projectcalico.org/v3 (Calico's native v3 CRDs, a tech preview of
// Calico v3.32: the custom resource is the v3 object itself).
type APIGroup string

// The two groups, as CALICO_API_GROUP names them.
const (
	APIGroupV1 APIGroup = APIVersion
	APIGroupV3 APIGroup = ModelAPIVersion
)

// ParseAPIGroup reads a CALICO_API_GROUP value: one of the two groups.
func ParseAPIGroup(s string) (APIGroup, error) {
	switch g := APIGroup(s); g {
	case APIGroupV1, APIGroupV3:
		return g, nil
	}
	return "", fmt.Errorf("%q: want %s or %s", s, APIGroupV1, APIGroupV3)
}

// GroupVersion splits g into its API group and version.
func (g APIGroup) GroupVersion() (group, version string) {
	if g == APIGroupV3 {
		return "projectcalico.org", "v3"
	}
	return Group, Version
}

// Serves says whether kind k is stored as a custom resource of g: on v3
// the IPAM kinds are not (their projectcalico.org/v3 shapes differ from
// v1's and are not established here).
func (g APIGroup) Serves(k Kind) error {
	if g == APIGroupV3 && k.Storage == IPAM {
		return fmt.Errorf("kind %s: IPAM is not served on the %s CRDs (its v3 kinds and shapes are not implemented; use %s)", k.Kind, APIGroupV3, APIGroupV1)
	}
	return nil
}

// serverMetaKeys are the metadata the API server owns: on v3 a write does
// not send them, and the model reads back the server's (uid,
// creationTimestamp, generation) or none (managedFields).
var serverMetaKeys = []string{"selfLink", "uid", "resourceVersion", "generation", "creationTimestamp",
	"deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"}

// ModelToCRV3 is ModelToCR for the projectcalico.org/v3 CRDs: the custom
// resource is the model object, with all its labels and annotations and no
// metadata annotation. The metadata the server owns is not sent; existing,
// when not nil, gives the uid and resourceVersion of the object the
// result replaces.
func ModelToCRV3(model, existing []byte) ([]byte, error) {
	top, k, meta, err := parseModel(model)
	if err != nil {
		return nil, err
	}
	if err := checkMetaKeys(meta, "metadata"); err != nil {
		return nil, err
	}
	id, err := modelIdentity(k, meta)
	if err != nil {
		return nil, err
	}
	own := map[string]json.RawMessage{}
	if existing != nil {
		ex, err := existingIdentity(k, id, existing)
		if err != nil {
			return nil, err
		}
		own["uid"], _ = json.Marshal(ex.UID)
		own["resourceVersion"], _ = json.Marshal(ex.ResourceVersion)
	}
	var crm object
	for _, key := range metaOrder {
		v := meta[key]
		if slices.Contains(serverMetaKeys, key) {
			v = own[key]
		}
		if !isEmptyValue(v) {
			crm.add(key, v)
		}
	}
	return crObject(ModelAPIVersion, k, crm, top)
}

// CRV3ToModel is CRToModel for a projectcalico.org/v3 custom resource: the
// model is the custom resource with its own metadata (uid as the server
// assigned it, labels, annotations, creationTimestamp, generation), less
// its resourceVersion (the revision) and managedFields.
func CRV3ToModel(cr []byte) (Read, error) {
	top, k, meta, id, err := parseCR(cr, ModelAPIVersion)
	if err != nil {
		return Read{}, err
	}
	src := maps.Clone(meta)
	delete(src, "managedFields")
	return modelRead(k, id, modelMeta(id.Name, id.Namespace, id.UID, src), top)
}

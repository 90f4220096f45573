package kdd

import (
	"encoding/json"
	"fmt"
)

// Read is a custom resource converted to its model.
type Read struct {
	Kind, Namespace, Name string
	// ResourceVersion is the custom resource's: the object's revision.
	ResourceVersion string
	// UID is the custom resource's own uid (the model holds it reversed):
	// what a delete's precondition names.
	UID string
	// Model is the model JSON, without resourceVersion.
	Model json.RawMessage
}

// crMeta is the part of a custom resource's metadata conversion reads.
type crMeta struct {
	Name            string            `json:"name"`
	Namespace       string            `json:"namespace"`
	UID             string            `json:"uid"`
	ResourceVersion string            `json:"resourceVersion"`
	Annotations     map[string]string `json:"annotations"`
}

// resourceKind finds a resource kind by name for a conversion.
func resourceKind(kind string) (Kind, error) {
	k, ok := kinds[kind]
	switch {
	case !ok:
		return k, fmt.Errorf("kind %q has no custom resource in %s", kind, Group)
	case k.Storage != Resource:
		return k, fmt.Errorf("kind %s is not converted as a resource (see the IPAM and derived conversions)", kind)
	}
	return k, nil
}

// ModelToCR converts a resource kind's model JSON to the custom resource
// Calico writes for it. existing, when not nil, is the stored custom
// resource the result replaces: its uid and resourceVersion are kept so the
// result is a valid update. Without one the uid is the model's reversed
// (empty for a new object: the server assigns it). The model's
// resourceVersion, if any, is not used: the caller sets the revision.
func ModelToCR(model, existing []byte) ([]byte, error) {
	top, k, meta, err := parseModel(model)
	if err != nil {
		return nil, err
	}
	crm, err := crMetadata(k, meta, existing)
	if err != nil {
		return nil, err
	}
	return crObject(APIVersion, k, crm, top)
}

// parseModel checks a resource kind's model JSON: its members, its
// apiVersion (projectcalico.org/v3 or none), its kind and its metadata.
func parseModel(model []byte) (map[string]json.RawMessage, Kind, map[string]json.RawMessage, error) {
	top, err := members(model, "model")
	if err != nil {
		return nil, Kind{}, nil, err
	}
	if bad := unknownMember(top, "kind", "apiVersion", "metadata", "spec", "status"); bad != "" {
		return nil, Kind{}, nil, fmt.Errorf("%s: not a field of a resource", bad)
	}
	var tm struct{ Kind, APIVersion string }
	if err := json.Unmarshal(model, &tm); err != nil {
		return nil, Kind{}, nil, fmt.Errorf("model: %w", err)
	}
	if tm.APIVersion != "" && tm.APIVersion != ModelAPIVersion {
		return nil, Kind{}, nil, fmt.Errorf("apiVersion %q: want %s", tm.APIVersion, ModelAPIVersion)
	}
	k, err := resourceKind(tm.Kind)
	if err != nil {
		return nil, k, nil, err
	}
	meta, err := members(orEmpty(top["metadata"]), "metadata")
	return top, k, meta, err
}

// crObject is the custom resource of apiVersion with metadata crm and the
// model's spec and status (a status only where the CRD has one).
func crObject(apiVersion string, k Kind, crm object, top map[string]json.RawMessage) ([]byte, error) {
	var o object
	o.addValue("apiVersion", apiVersion)
	o.addValue("kind", k.Kind)
	o.addValue("metadata", crm)
	spec, err := crSpec(orEmpty(top["spec"]))
	if err != nil {
		return nil, err
	}
	o.add("spec", spec)
	if st := top["status"]; k.CRStatus && !isEmptyObject(st) {
		o.add("status", st)
	} else if !isEmptyObject(st) {
		return nil, fmt.Errorf("status: a %s has no status in %s", k.Kind, apiVersion)
	}
	return json.Marshal(o)
}

// crMetadata is a custom resource's metadata for a model's.
func crMetadata(k Kind, meta map[string]json.RawMessage, existing []byte) (object, error) {
	id, err := modelIdentity(k, meta)
	if err != nil {
		return nil, err
	}
	uid, err := ReverseUID(id.UID)
	if err != nil {
		return nil, fmt.Errorf("metadata.uid: %w", err)
	}
	rv := ""
	if existing != nil {
		ex, err := existingIdentity(k, id, existing)
		if err != nil {
			return nil, err
		}
		uid, rv = ex.UID, ex.ResourceVersion
	}
	labels, err := crLabels(meta["labels"])
	if err != nil {
		return nil, err
	}
	ann, err := metadataAnnotation(k, meta)
	if err != nil {
		return nil, err
	}
	var o object
	o.addValue("name", id.Name)
	if id.Namespace != "" {
		o.addValue("namespace", id.Namespace)
	}
	if uid != "" {
		o.addValue("uid", uid)
	}
	if rv != "" {
		o.addValue("resourceVersion", rv)
	}
	if labels != nil {
		o.addValue("labels", labels)
	}
	o.addValue("annotations", map[string]string{MetadataAnnotation: ann})
	return o, nil
}

// modelIdentity is a model's name, namespace and uid, checked for kind k.
func modelIdentity(k Kind, meta map[string]json.RawMessage) (crMeta, error) {
	var id crMeta
	if err := json.Unmarshal(mustObject(meta), &id); err != nil {
		return id, fmt.Errorf("metadata: %w", err)
	}
	if id.Name == "" {
		return id, fmt.Errorf("metadata.name: required")
	}
	if k.Namespaced != (id.Namespace != "") {
		return id, fmt.Errorf("metadata.namespace %q: a %s is namespaced: %v", id.Namespace, k.Kind, k.Namespaced)
	}
	return id, nil
}

// existingIdentity is the metadata of the stored custom resource an update
// replaces, which must be the model's object.
func existingIdentity(k Kind, id crMeta, existing []byte) (crMeta, error) {
	var ex struct{ Metadata crMeta }
	if err := json.Unmarshal(existing, &ex); err != nil {
		return ex.Metadata, fmt.Errorf("existing %s: %w", k.Kind, err)
	}
	if ex.Metadata.Name != id.Name || ex.Metadata.Namespace != id.Namespace {
		return ex.Metadata, fmt.Errorf("existing %s is %s/%s, not %s/%s", k.Kind, ex.Metadata.Namespace, ex.Metadata.Name, id.Namespace, id.Name)
	}
	return ex.Metadata, nil
}

// CRToModel converts a resource kind's custom resource to its model. The
// metadata comes from the projectcalico.org/metadata annotation; a custom
// resource without one (written by kubectl) is read from its own metadata
// (labels, annotations, generation, managedFields, ...). With the
// annotation, the custom resource's own labels (a copy of the
// projectcalico.org/ ones) and other annotations are not read, as in
// Calico. The model's uid is the custom resource's reversed.
func CRToModel(cr []byte) (Read, error) {
	top, k, meta, id, err := parseCR(cr, APIVersion)
	if err != nil {
		return Read{}, err
	}
	src, err := metaSource(id, meta)
	if err != nil {
		return Read{}, err
	}
	uid, err := ReverseUID(id.UID)
	if err != nil {
		return Read{}, fmt.Errorf("metadata.uid: %w", err)
	}
	return modelRead(k, id, modelMeta(id.Name, id.Namespace, uid, src), top)
}

// parseCR checks a resource kind's custom resource of apiVersion: its
// members, kind and metadata.
func parseCR(cr []byte, apiVersion string) (map[string]json.RawMessage, Kind, map[string]json.RawMessage, crMeta, error) {
	var id crMeta
	top, err := members(cr, "custom resource")
	if err != nil {
		return nil, Kind{}, nil, id, err
	}
	if bad := unknownMember(top, "kind", "apiVersion", "metadata", "spec", "status"); bad != "" {
		return nil, Kind{}, nil, id, fmt.Errorf("%s: not a field of a custom resource", bad)
	}
	var tm struct{ Kind, APIVersion string }
	if err := json.Unmarshal(cr, &tm); err != nil {
		return nil, Kind{}, nil, id, fmt.Errorf("custom resource: %w", err)
	}
	if tm.APIVersion != apiVersion {
		return nil, Kind{}, nil, id, fmt.Errorf("apiVersion %q: want %s", tm.APIVersion, apiVersion)
	}
	k, err := resourceKind(tm.Kind)
	if err != nil {
		return nil, k, nil, id, err
	}
	meta, err := members(orEmpty(top["metadata"]), "metadata")
	if err != nil {
		return nil, k, nil, id, err
	}
	if err := json.Unmarshal(mustObject(meta), &id); err != nil {
		return nil, k, nil, id, fmt.Errorf("metadata: %w", err)
	}
	return top, k, meta, id, nil
}

// modelRead is the model object of kind k with metadata md and the custom
// resource's spec and status.
func modelRead(k Kind, id crMeta, md object, top map[string]json.RawMessage) (Read, error) {
	var o object
	o.addValue("kind", k.Kind)
	o.addValue("apiVersion", ModelAPIVersion)
	o.addValue("metadata", md)
	o.add("spec", orEmpty(top["spec"]))
	if st := top["status"]; !isNull(st) {
		o.add("status", st)
	} else if k.ModelStatus {
		o.add("status", json.RawMessage("{}"))
	}
	model, err := json.Marshal(o)
	return Read{Kind: k.Kind, Namespace: id.Namespace, Name: id.Name, ResourceVersion: id.ResourceVersion, UID: id.UID, Model: model}, err
}

// metaSource is where a custom resource's v3 metadata is read from: the
// annotation, or the custom resource's own metadata without one.
func metaSource(id crMeta, meta map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	ann, ok := id.Annotations[MetadataAnnotation]
	if !ok {
		return meta, nil
	}
	src, err := members([]byte(ann), "metadata.annotations["+MetadataAnnotation+"]")
	if err != nil {
		return nil, err
	}
	return src, checkMetaKeys(src, "metadata.annotations["+MetadataAnnotation+"]")
}

// orEmpty is v, or {} when absent or null.
func orEmpty(v json.RawMessage) json.RawMessage {
	if isNull(v) {
		return json.RawMessage("{}")
	}
	return v
}

// mustObject re-encodes parsed members (they came from valid JSON).
func mustObject(m map[string]json.RawMessage) []byte {
	b, _ := json.Marshal(m)
	return b
}

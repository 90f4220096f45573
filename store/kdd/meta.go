package kdd

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// MetadataAnnotation holds a resource's v3 object metadata on its custom
// resource, as compact JSON.
const MetadataAnnotation = "projectcalico.org/metadata"

// metaOrder is the order Kubernetes writes object metadata in, which is the
// order of the keys in the metadata annotation.
var metaOrder = []string{
	"name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
	"creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
	"ownerReferences", "finalizers", "managedFields",
}

// metaOwnKeys are kept on the custom resource itself, never in the
// annotation (the name is, for kinds with NameInMeta).
var metaOwnKeys = []string{"name", "namespace", "uid", "resourceVersion"}

// isEmptyValue says whether a raw value is what Kubernetes leaves out of
// object metadata: null, "", 0, [] or {}.
func isEmptyValue(v json.RawMessage) bool {
	if isEmptyObject(v) {
		return true
	}
	switch strings.TrimSpace(string(v)) {
	case `""`, "0", "[]":
		return true
	}
	return false
}

// checkMetaKeys refuses a metadata member Kubernetes object metadata does
// not have (where names the object: "metadata" or the annotation).
func checkMetaKeys(meta map[string]json.RawMessage, where string) error {
	if bad := unknownMember(meta, metaOrder...); bad != "" {
		return fmt.Errorf("%s.%s: not a field of Kubernetes object metadata", where, bad)
	}
	return nil
}

// metadataAnnotation is the annotation value for a model's metadata:
// Kubernetes' key order, the name only for NameInMeta kinds, no namespace,
// uid or resourceVersion, and creationTimestamp always (null when unset).
func metadataAnnotation(k Kind, meta map[string]json.RawMessage) (string, error) {
	if err := checkMetaKeys(meta, "metadata"); err != nil {
		return "", err
	}
	var o object
	for _, key := range metaOrder {
		v := meta[key]
		switch {
		case key == "name" && k.NameInMeta:
		case slices.Contains(metaOwnKeys, key):
			continue
		case key == "creationTimestamp" && isNull(v):
			v = json.RawMessage("null")
		case isEmptyValue(v):
			continue
		}
		o.add(key, v)
	}
	b, err := json.Marshal(o)
	return string(b), err
}

// modelMeta builds a model's metadata: name, namespace and uid from the
// custom resource, the rest from src (the annotation's content, or the
// custom resource's own metadata when it has no annotation).
func modelMeta(name, namespace, uid string, src map[string]json.RawMessage) object {
	var o object
	o.addValue("name", name)
	if namespace != "" {
		o.addValue("namespace", namespace)
	}
	if uid != "" {
		o.addValue("uid", uid)
	}
	for _, key := range metaOrder {
		if v := src[key]; !slices.Contains(metaOwnKeys, key) && !isEmptyValue(v) {
			o.add(key, v)
		}
	}
	return o
}

// crLabels are the labels a custom resource carries itself: only the keys
// containing "projectcalico.org/" (the rest live in the annotation).
func crLabels(raw json.RawMessage) (map[string]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var all map[string]string
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, fmt.Errorf("metadata.labels: %w", err)
	}
	var out map[string]string
	for k, v := range all {
		if strings.Contains(k, "projectcalico.org/") {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out, nil
}

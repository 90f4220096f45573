package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/calico-aio/calico-aio/store/api/calicoschema"
)

// User input is decoded strictly (issue #22): a member that neither our
// type nor Calico v3.32.1's schema for the kind knows is a typo or a field
// in the wrong place, and the write is refused with calicoctl's message.
// Objects another writer stored are not checked: Decode keeps their unknown
// members (unmodelled.go).

// UnknownFieldError is a member of user input that the kind does not have.
// Its message is real calicoctl's, byte for byte: only the member's own name
// is printed, not where it is.
type UnknownFieldError struct {
	Name string // the member as written: "logSeverityScren"
	Path string // where it is: "spec.logSeverityScren"
}

func (e *UnknownFieldError) Error() string {
	return "field in document is not recognized or is in the wrong location: " + e.Name
}

// metadataFields are the Kubernetes object metadata members calicoctl
// accepts beyond the ones ObjectMeta models; their content is bookkeeping.
var metadataFields = []string{"generateName", "selfLink", "generation", "deletionTimestamp",
	"deletionGracePeriodSeconds", "ownerReferences", "finalizers", "managedFields"}

// documentedFields are Calico's documented v3 fields of the kinds that have
// no CRD (their schema is Calico's Go API) and that our types do not model.
var documentedFields = map[string][]string{
	"WorkloadEndpoint": {"spec.qosControls.dscp"},
}

// CheckKnownFields returns an *UnknownFieldError for the first member of
// the JSON object data that its kind does not know, in the order calicoctl
// finds it (members sorted by name, depth first), or nil. data must decode
// (Decode) first; a kind that is not registered is not checked here.
func CheckKnownFields(data []byte) error {
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("decoding resource: %w", err)
	}
	kind, _ := obj["kind"].(string)
	k, ok := kinds[kind]
	if !ok {
		return nil
	}
	return knownWalk{kind: kind}.object(obj, reflect.TypeOf(k.New()), "")
}

// CheckKnownPatch checks a merge patch for kind as CheckKnownFields checks
// a document; a null member (a deletion) is not checked.
func CheckKnownPatch(kind string, patch map[string]any) error {
	k, ok := kinds[kind]
	if !ok {
		return nil
	}
	return knownWalk{kind: kind, patch: true}.object(patch, reflect.TypeOf(k.New()), "")
}

type knownWalk struct {
	kind  string
	patch bool
}

// value checks v against t (nil: only Calico's schema knows it) at path.
func (w knownWalk) value(v any, t reflect.Type, path string) error {
	if t != nil && opaque(t) {
		return nil
	}
	if t != nil {
		t = deref(t)
		if opaque(t) {
			return nil
		}
	}
	switch x := v.(type) {
	case map[string]any:
		return w.object(x, t, path)
	case []any:
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		for _, item := range x {
			if err := w.value(item, et, path+"[]"); err != nil {
				return err
			}
		}
	}
	return nil
}

// object checks the members of m, sorted by name.
func (w knownWalk) object(m map[string]any, t reflect.Type, path string) error {
	var fields map[string]reflect.Type
	if t != nil {
		t = deref(t)
		switch t.Kind() {
		case reflect.Struct:
			fields = map[string]reflect.Type{}
			jsonFields(t, fields)
		case reflect.Map:
			if t.Key().Kind() == reflect.String {
				for _, key := range slices.Sorted(maps.Keys(m)) {
					if err := w.value(m[key], t.Elem(), join(path, "{}")); err != nil {
						return err
					}
				}
				return nil
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(m)) {
		if w.patch && m[key] == nil {
			continue
		}
		at := join(path, key)
		var ft reflect.Type
		if fields != nil {
			if _, f, ok := fieldFor(fields, key); ok {
				ft = f
			}
		}
		switch {
		case ft != nil:
		case path == "metadata" && slices.Contains(metadataFields, key),
			slices.Contains(documentedFields[w.kind], at):
			continue // known, content not checked
		case calicoschema.Known(w.kind, at):
		case calicoschema.Known(w.kind, join(path, "{}")):
			at = join(path, "{}")
		default:
			return &UnknownFieldError{Name: key, Path: at}
		}
		if err := w.value(m[key], ft, at); err != nil {
			return err
		}
	}
	return nil
}

func join(path, name string) string {
	switch {
	case path == "":
		return name
	case name == "{}":
		return path + name
	}
	return path + "." + name
}

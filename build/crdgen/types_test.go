package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/api/calicoschema"
)

// Our types (store/api) against the CRDs: every JSON member a kind's type
// encodes exists in the generated schema at the same path with a compatible
// type, so the types and the CRDs cannot drift apart unnoticed.

// knownDrift are differences found between our types and Calico v3.32.1's
// schema, with why they stand (store/api is not this package's to change).
// A member Calico's schema lacks is pruned by the apiserver: the
// Kubernetes datastore must refuse it at write or not write it.
var knownDrift = map[string]string{
	"BGPConfiguration spec.nodeMeshKeepaliveTime: our type has it, Calico's schema does not": "refused at write unless unset (store/api/unsupported.go)",
	"BGPPeer spec.birdGatewayMode: our type has it, Calico's schema does not":                "refused at write unless unset (store/api/unsupported.go)",
	"BGPPeer spec.failureDetectionMode: our type has it, Calico's schema does not":           "refused at write unless None, which the CRD then prunes",
	"BGPPeer spec.restartMode: our type has it, Calico's schema does not":                    "refused at write unless GracefulRestart, which the CRD then prunes",
	"FelixConfiguration spec.iptablesLockTimeout: our type has it, Calico's schema does not": "accepted and stored by our type; Calico v3.32.1 no longer has it",
	"Tier status: our type has it, Calico's schema does not":                                 "the v3 Tier's status ({}); the v1 CR has none",
}

func TestTypesMatchCRDs(t *testing.T) {
	checked := 0
	var drift []string
	for _, k := range api.Kinds() {
		if !calicoschema.Has(k.Kind) {
			continue // derived from Kubernetes objects in that datastore: no CRD
		}
		c := crdFor(t, k.Kind)
		root, err := build(c)
		if err != nil {
			t.Fatal(err)
		}
		w := typeWalk{kind: k.Kind}
		w.members(reflect.TypeOf(k.New()), root.Spec.Versions[0].Schema.OpenAPIV3Schema, "")
		checked += w.checked
		drift = append(drift, w.drift...)
	}
	if checked < 500 {
		t.Fatalf("only %d type members checked", checked)
	}
	for _, d := range drift {
		if _, ok := knownDrift[d]; !ok {
			t.Errorf("%s", d)
		}
	}
	for d := range knownDrift {
		if !slices.Contains(drift, d) {
			t.Errorf("known drift %q is gone: take it off the list", d)
		}
	}
}

func crdFor(t *testing.T, kind string) calicoschema.CRD {
	t.Helper()
	for _, c := range calicoschema.CRDs() {
		if c.Kind == kind {
			return c
		}
	}
	t.Fatalf("%s has fields but no CRD line", kind)
	return calicoschema.CRD{}
}

type typeWalk struct {
	kind    string
	checked int
	drift   []string
}

// members checks the JSON members of struct type t against schema s.
func (w *typeWalk) members(t reflect.Type, s *Schema, path string) {
	for name, ft := range jsonMembers(t) {
		if path == "" && (name == "metadata" || name == "kind" || name == "apiVersion") {
			continue
		}
		p := name
		if path != "" {
			p = path + "." + name
		}
		sub := s.Properties[name]
		if sub == nil {
			w.drift = append(w.drift, fmt.Sprintf("%s %s: our type has it, Calico's schema does not", w.kind, p))
			continue
		}
		w.value(ft, sub, p)
	}
}

// value checks one member's type against its schema.
func (w *typeWalk) value(t reflect.Type, s *Schema, path string) {
	w.checked++
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	want := s.Type
	if s.IntOrString && want == "" {
		want = intOrString
	}
	got, ok := schemaType(t)
	if !compatible(got, want) {
		w.drift = append(w.drift, fmt.Sprintf("%s %s: our type is %s (%s), Calico's schema %s", w.kind, path, t, got, want))
		return
	}
	if !ok {
		return // encodes itself
	}
	switch {
	case t.Kind() == reflect.Struct:
		w.members(t, s, path)
	case t.Kind() == reflect.Slice && s.Items != nil:
		w.value(t.Elem(), s.Items, path+"[]")
	case t.Kind() == reflect.Map && s.AdditionalProperties != nil:
		w.value(t.Elem(), s.AdditionalProperties, path+"{}")
	}
}

// schemaType is the schema type t encodes as; ok is false for a type that
// encodes itself ("any" then).
func schemaType(t reflect.Type) (string, bool) {
	m, um := reflect.TypeFor[json.Marshaler](), reflect.TypeFor[json.Unmarshaler]()
	if t.Implements(m) || reflect.PointerTo(t).Implements(um) {
		return "any", false
	}
	switch t.Kind() {
	case reflect.String:
		return "string", true
	case reflect.Bool:
		return "boolean", true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer", true
	case reflect.Float32, reflect.Float64:
		return "number", true
	case reflect.Slice, reflect.Array:
		return "array", true
	case reflect.Map, reflect.Struct:
		return "object", true
	}
	return "any", false
}

// compatible says whether a value of our type got always fits schema type want.
func compatible(got, want string) bool {
	switch {
	case got == want, got == "any":
		return true
	case want == intOrString:
		return got == "string" || got == "integer"
	}
	return false
}

// jsonMembers maps the JSON member names struct t encodes to their types,
// embedded structs' members included.
func jsonMembers(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for _, f := range reflect.VisibleFields(t) {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case tag == "-" || !f.IsExported() && !f.Anonymous:
		case f.Anonymous && name == "":
		case len(f.Index) > 1 && !embeddedPath(t, f.Index):
		default:
			if name == "" {
				name = f.Name
			}
			out[name] = f.Type
		}
	}
	return out
}

// embeddedPath says whether the field at index is reached through untagged
// embedded structs only (encoding/json flattens those).
func embeddedPath(t reflect.Type, index []int) bool {
	for _, i := range index[:len(index)-1] {
		f := t.Field(i)
		if !f.Anonymous || f.Tag.Get("json") != "" {
			return false
		}
		t = f.Type
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
	}
	return true
}

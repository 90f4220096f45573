package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/calico-aio/calico-aio/store/api/calicoschema"
)

// Schema is the part of apiextensions.k8s.io/v1 JSONSchemaProps that
// Calico's CRDs use, in the API's member names.
type Schema struct {
	Description          string             `json:"description,omitempty"`
	Type                 string             `json:"type,omitempty"`
	Format               string             `json:"format,omitempty"`
	Enum                 []any              `json:"enum,omitempty"`
	Pattern              string             `json:"pattern,omitempty"`
	Minimum              *int64             `json:"minimum,omitempty"`
	Maximum              *int64             `json:"maximum,omitempty"`
	AnyOf                []Schema           `json:"anyOf,omitempty"`
	IntOrString          bool               `json:"x-kubernetes-int-or-string,omitempty"`
	Items                *Schema            `json:"items,omitempty"`
	Properties           map[string]*Schema `json:"properties,omitempty"`
	AdditionalProperties *Schema            `json:"additionalProperties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	// Extra are members the field list does not carry (extras.go), as JSON.
	Extra map[string]json.RawMessage `json:"-"`
}

// MarshalJSON writes the schema's members and its Extra ones.
func (s Schema) MarshalJSON() ([]byte, error) {
	type plain Schema
	b, err := json.Marshal(plain(s))
	if err != nil || len(s.Extra) == 0 {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range s.Extra {
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("schema member %s twice", k)
		}
		m[k] = v
	}
	return json.Marshal(m)
}

// Path segments that are not member names: an array's items, a map's values.
const (
	itemsSeg  = "[]"
	valuesSeg = "{}"
)

// segments splits a field list path ("spec.ingress[].ports[]") into member
// names and the items/values markers: spec, ingress, [], ports, [].
func segments(path string) []string {
	var out []string
	for part := range strings.SplitSeq(path, ".") {
		name := part
		var marks []string
		for {
			if base, ok := strings.CutSuffix(name, itemsSeg); ok {
				name, marks = base, append(marks, itemsSeg)
			} else if base, ok := strings.CutSuffix(name, valuesSeg); ok {
				name, marks = base, append(marks, valuesSeg)
			} else {
				break
			}
		}
		slices.Reverse(marks)
		out = append(append(out, name), marks...)
	}
	return out
}

// objectSchema builds a kind's openAPIV3Schema from its fields.
func objectSchema(fields []calicoschema.Field) (*Schema, error) {
	root := &Schema{Type: "object", Properties: map[string]*Schema{
		"apiVersion": {Type: "string"},
		"kind":       {Type: "string"},
		"metadata":   {Type: "object"},
	}}
	for _, f := range fields {
		node, parent, name := root, root, ""
		for _, seg := range segments(f.Path) {
			parent, name = node, seg
			node = child(node, seg)
		}
		if err := apply(node, f); err != nil {
			return nil, fmt.Errorf("%s %s: %w", f.Kind, f.Path, err)
		}
		if f.Required && !slices.Contains(parent.Required, name) {
			parent.Required = append(parent.Required, name)
			slices.Sort(parent.Required)
		}
	}
	return root, nil
}

// child returns (making it) the schema below s at one path segment.
func child(s *Schema, seg string) *Schema {
	switch seg {
	case itemsSeg:
		if s.Items == nil {
			s.Items = &Schema{}
		}
		return s.Items
	case valuesSeg:
		if s.AdditionalProperties == nil {
			s.AdditionalProperties = &Schema{}
		}
		return s.AdditionalProperties
	}
	if s.Properties == nil {
		s.Properties = map[string]*Schema{}
	}
	if s.Properties[seg] == nil {
		s.Properties[seg] = &Schema{}
	}
	return s.Properties[seg]
}

// intOrString is the field list's type (and marker) for a value that may be
// an integer or a string.
const intOrString = "int-or-string"

// apply sets a field's type and constraints on its schema.
func apply(s *Schema, f calicoschema.Field) error {
	if f.Type == intOrString {
		s.AnyOf = []Schema{{Type: "integer"}, {Type: "string"}}
		s.IntOrString = true
	} else {
		s.Type = f.Type
	}
	for _, c := range f.Constraints {
		if err := constrain(s, c); err != nil {
			return err
		}
	}
	return nil
}

// constrain applies one field list constraint ("enum=A|B", "min=1", ...).
func constrain(s *Schema, c string) error {
	if c == intOrString {
		s.IntOrString = true
		return nil
	}
	key, val, ok := strings.Cut(c, "=")
	if !ok {
		return fmt.Errorf("constraint %q has no value", c)
	}
	var err error
	switch key {
	case "format":
		s.Format = val
	case "pattern":
		s.Pattern = val
	case "enum":
		s.Enum, err = enumValues(s.Type, val)
	case "min":
		s.Minimum, err = bound(val)
	case "max":
		s.Maximum, err = bound(val)
	default:
		err = fmt.Errorf("unknown constraint %q", c)
	}
	return err
}

// enumValues are an enum's values typed as the field is.
func enumValues(typ, list string) ([]any, error) {
	var out []any
	for v := range strings.SplitSeq(list, "|") {
		if typ != "integer" {
			out = append(out, v)
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("integer enum value %q: %w", v, err)
		}
		out = append(out, n)
	}
	return out, nil
}

func bound(v string) (*int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("bound %q: %w", v, err)
	}
	return &n, nil
}

// Package calicoschema is Calico v3.32.1's resource schema as data: every
// field of every CRD Calico installs, with its type and constraints
// (crd-fields-v3.32.1.tsv, generated from Calico's manifests/crds.yaml).
// Strict decoding of user input asks it which fields Calico knows; the
// field-coverage tests walk it.
package calicoschema

import (
	_ "embed"
	"slices"
	"strings"
	"sync"
)

//go:embed crd-fields-v3.32.1.tsv
var tsv string

// Field is one field of a kind's schema.
type Field struct {
	Kind string
	// Path is JSON member names joined by "."; "[]" marks an array's
	// items and "{}" a map's values: "spec.ingress[].action",
	// "spec.bpfLogFilters{}".
	Path        string
	Required    bool
	Type        string   // object, array, string, integer, boolean, int-or-string
	Constraints []string // "enum=A|B", "pattern=...", "min=1", "format=int32"
}

type schema struct {
	byKind map[string][]Field
	paths  map[string]bool // kind + "." + path
}

var load = sync.OnceValue(func() schema {
	s := schema{byKind: map[string][]Field{}, paths: map[string]bool{}}
	for line := range strings.SplitSeq(tsv, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) < 3 {
			continue
		}
		f := Field{Kind: cols[0]}
		f.Path, f.Required = strings.ReplaceAll(cols[1], "!", ""), strings.HasSuffix(cols[1], "!")
		rest := cols[2:]
		if rest[0] == "" && len(rest) > 1 { // int-or-string has no plain type
			rest = rest[1:]
		}
		f.Type, f.Constraints = rest[0], rest[1:]
		s.byKind[f.Kind] = append(s.byKind[f.Kind], f)
		s.paths[f.Kind+"."+f.Path] = true
	}
	return s
})

// Kinds lists the kinds the schema has, sorted.
func Kinds() []string {
	out := make([]string, 0, len(load().byKind))
	for k := range load().byKind {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Fields returns kind's fields in schema order (nil for a kind Calico has
// no CRD for).
func Fields(kind string) []Field { return load().byKind[kind] }

// Has says whether kind has a CRD schema.
func Has(kind string) bool { return load().byKind[kind] != nil }

// Known says whether path (in Field.Path form) is a field of kind.
func Known(kind, path string) bool { return load().paths[kind+"."+path] }

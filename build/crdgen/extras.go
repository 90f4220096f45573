package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// crd-extras-v3.32.1.tsv is the rest of Calico's schemas, beyond the field
// list: defaults, length, item and property bounds, nullable, list and map
// types, CEL validation rules with their messages. A cluster with our CRDs
// defaults and refuses exactly what one with Calico's does.
//
//go:embed crd-extras-v3.32.1.tsv
var extrasTSV string

// schemaExtra is one row: a member of the schema at a kind's field path.
type schemaExtra struct {
	kind, path, member string
	value              json.RawMessage
}

var loadExtras = sync.OnceValues(func() (map[string][]schemaExtra, error) {
	out := map[string][]schemaExtra{}
	for i, line := range strings.Split(extrasTSV, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) != 4 || !json.Valid([]byte(cols[3])) {
			return nil, fmt.Errorf("crd-extras line %d: want kind, path, member and a JSON value: %q", i+1, line)
		}
		out[cols[0]] = append(out[cols[0]], schemaExtra{kind: cols[0], path: cols[1], member: cols[2], value: json.RawMessage(cols[3])})
	}
	return out, nil
})

// addExtras sets kind's extra members on its schema root; each names a
// field the schema has.
func addExtras(root *Schema, kind string) error {
	all, err := loadExtras()
	if err != nil {
		return err
	}
	for _, e := range all[kind] {
		node := root
		if e.path != "" {
			for _, seg := range segments(e.path) {
				if node = lookup(node, seg); node == nil {
					return fmt.Errorf("crd-extras: %s has no field %s", kind, e.path)
				}
			}
		}
		if node.Extra == nil {
			node.Extra = map[string]json.RawMessage{}
		}
		node.Extra[e.member] = e.value
	}
	return nil
}

// lookup is the schema below s at one path segment, or nil.
func lookup(s *Schema, seg string) *Schema {
	switch seg {
	case itemsSeg:
		return s.Items
	case valuesSeg:
		return s.AdditionalProperties
	}
	return s.Properties[seg]
}

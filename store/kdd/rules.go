package kdd

import (
	"encoding/json"
	"fmt"
)

// ruleLists are the spec members holding policy rules.
var ruleLists = []string{"ingress", "egress"}

// crSpec is a model's spec as Calico writes it in a custom resource: a
// rule's empty source or destination ({}, which the etcd model keeps) is
// left out, as in what Calico stores.
func crSpec(spec json.RawMessage) (json.RawMessage, error) {
	m, err := members(spec, "spec")
	if err != nil {
		return nil, err
	}
	changed := false
	for _, list := range ruleLists {
		if isNull(m[list]) {
			continue
		}
		var rules []map[string]json.RawMessage
		if err := json.Unmarshal(m[list], &rules); err != nil {
			return nil, fmt.Errorf("spec.%s: %w", list, err)
		}
		for _, r := range rules {
			for _, side := range []string{"source", "destination"} {
				if v, ok := r[side]; ok && isEmptyObject(v) {
					delete(r, side)
					changed = true
				}
			}
		}
		if m[list], err = json.Marshal(rules); err != nil {
			return nil, fmt.Errorf("spec.%s: %w", list, err)
		}
	}
	if !changed {
		return spec, nil
	}
	return json.Marshal(m)
}

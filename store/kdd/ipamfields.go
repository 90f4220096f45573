package kdd

import (
	"encoding/json"
	"fmt"
	"strings"
)

// rule says how one member is written on one side of a conversion.
type rule struct {
	// def is written when the source has no value (absent or null), or one
	// equal to omit; nil writes nothing.
	def json.RawMessage
	// omit is a value left out on this side (`false`, `0`, `""`).
	omit string
}

// field maps one member between an etcd-shaped IPAM value and the spec
// of its custom resource.
type field struct {
	model, cr     string
	toCR, toModel rule
}

// Common rules.
var (
	emptyList  = rule{def: json.RawMessage("[]")}
	emptyMap   = rule{def: json.RawMessage("{}")}
	falseBool  = rule{def: json.RawMessage("false")}
	zeroNumber = rule{def: json.RawMessage("0")}
	omitFalse  = rule{omit: "false"}
	omitZero   = rule{omit: "0"}
	omitEmpty  = rule{omit: `""`}
)

// convert maps src's members through fields into an object, toward the
// custom resource (toCR) or the model. A source member no field maps is
// refused by name (what names the source in the error).
func convert(src map[string]json.RawMessage, fields []field, toCR bool, what string) (object, error) {
	known := make([]string, 0, len(fields))
	for _, f := range fields {
		known = append(known, f.from(toCR))
	}
	if bad := unknownMember(src, known...); bad != "" {
		return nil, fmt.Errorf("%s.%s: not a field Calico's IPAM stores", what, bad)
	}
	var o object
	for _, f := range fields {
		r, to := f.toModel, f.model
		if toCR {
			r, to = f.toCR, f.cr
		}
		v := src[f.from(toCR)]
		if isNull(v) || (r.omit != "" && strings.TrimSpace(string(v)) == r.omit) {
			if r.def == nil {
				continue
			}
			v = r.def
		}
		o.add(to, v)
	}
	return o, nil
}

// from is the member's name on the source side.
func (f field) from(toCR bool) string {
	if toCR {
		return f.model
	}
	return f.cr
}

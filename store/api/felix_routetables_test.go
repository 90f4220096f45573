package api

import (
	"testing"
)

// routeTableRange(s) are validated as Calico validates them; the agent
// uses no table in them (felix/dataplane TestRouteTableRangesLeftAlone).
func TestFelixRouteTableRangesValidation(t *testing.T) {
	for _, tc := range []struct {
		spec, bad string // bad: the field named in the error, "" when valid
	}{
		{`"routeTableRange":{"min":1,"max":250}`, ""},
		{`"routeTableRange":{"min":0,"max":250}`, "spec.routeTableRange"},
		{`"routeTableRange":{"min":10,"max":251}`, "spec.routeTableRange"},
		{`"routeTableRange":{"min":20,"max":10}`, "spec.routeTableRange"},
		{`"routeTableRanges":[{"min":1,"max":250}]`, ""},
		{`"routeTableRanges":[{"min":1,"max":250},{"min":65000,"max":70000},{"min":240,"max":260}]`, ""}, // 253-255 inside: ignored, as Calico
		{`"routeTableRanges":[{"min":1,"max":250},{"min":0,"max":4}]`, "spec.routeTableRanges[1]"},
		{`"routeTableRanges":[{"min":9,"max":8}]`, "spec.routeTableRanges[0]"},
		{`"routeTableRanges":[{"min":4294967290,"max":4294967296}]`, "spec.routeTableRanges[0]"},
		{`"routeTableRanges":[{"min":1,"max":65535},{"min":70000,"max":70000}]`, "spec.routeTableRanges"},
	} {
		checkFelixSpec(t, tc.spec, tc.bad)
	}
}

package api

import (
	"strings"
	"testing"
)

// TestFelixKubeNodePortRangesValidation: kubeNodePortRanges takes ports
// and port ranges, as numbers or strings, and refuses at write a bad
// range, a port out of range and a port name (Calico's Felix refuses a
// name too), naming the list item; a good value round-trips.
func TestFelixKubeNodePortRangesValidation(t *testing.T) {
	for _, tc := range []struct {
		spec, bad string // bad: the field the error must name ("" for none)
	}{
		{`"kubeNodePortRanges":["30000:32767"]`, ""},
		{`"kubeNodePortRanges":["30000:30100",31000,"32000"]`, ""},
		{`"kubeNodePortRanges":[]`, ""},
		{`"kubeNodePortRanges":["32767:30000"]`, "spec.kubeNodePortRanges[0]"},
		{`"kubeNodePortRanges":["30000:32767",0]`, "spec.kubeNodePortRanges[1]"},
		{`"kubeNodePortRanges":["30000:70000"]`, "spec.kubeNodePortRanges[0]"},
		{`"kubeNodePortRanges":["30000:32767","http"]`, "spec.kubeNodePortRanges[1]"},
		{`"kubeNodePortRanges":["a:b"]`, "spec.kubeNodePortRanges[0]"},
	} {
		r := checkFelixSpec(t, tc.spec, tc.bad)
		if r == nil {
			continue
		}
		b, err := Marshal(r)
		if err != nil || !strings.Contains(string(b), tc.spec) {
			t.Errorf("%s: marshalled as %s (%v)", tc.spec, b, err)
		}
		if p := Unsupported(r); len(p) != 0 {
			t.Errorf("%s: reported unsupported: %v", tc.spec, p)
		}
	}
}

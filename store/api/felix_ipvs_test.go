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
		r, err := Decode([]byte(obj("FelixConfiguration", `"name":"default"`, tc.spec)))
		if err != nil {
			t.Errorf("%s: decode: %v", tc.spec, err)
			continue
		}
		err = r.Validate()
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%s refused: %v", tc.spec, err)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%s: error %v, want one naming %s", tc.spec, err, tc.bad)
		case tc.bad == "":
			b, err := Marshal(r)
			if err != nil || !strings.Contains(string(b), tc.spec) {
				t.Errorf("%s: marshalled as %s (%v)", tc.spec, b, err)
			}
			if p := Unsupported(r); len(p) != 0 {
				t.Errorf("%s: reported unsupported: %v", tc.spec, p)
			}
		}
	}
}

package api

import "testing"

// TestFelixEndpointStatusPathPrefixValidation: an absolute directory,
// none or empty (no status files) are accepted; a relative path is
// refused at write, naming the field.
func TestFelixEndpointStatusPathPrefixValidation(t *testing.T) {
	for _, tc := range []struct{ spec, bad string }{
		{`"endpointStatusPathPrefix":"/var/run/calico"`, ""},
		{`"endpointStatusPathPrefix":"none"`, ""},
		{`"endpointStatusPathPrefix":""`, ""},
		{`"endpointStatusPathPrefix":"run/calico"`, "spec.endpointStatusPathPrefix"},
	} {
		checkFelixSpec(t, tc.spec, tc.bad)
	}
	r := checkFelixSpec(t, `"endpointStatusPathPrefix":""`, "")
	if f, ok := r.(*FelixConfiguration); !ok || f.Spec.EndpointStatusPathPrefix == nil || *f.Spec.EndpointStatusPathPrefix != "" {
		t.Errorf("an explicit empty endpointStatusPathPrefix (no files) is not kept apart from unset: %+v", r)
	}
}

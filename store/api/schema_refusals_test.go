package api

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// okValue is a refusal's accepted value as JSON would carry it.
func okValue(ok string) any {
	var v any
	if json.Unmarshal([]byte(ok), &v) == nil {
		return v
	}
	return ok
}

// withField builds an object of kind with path set to v.
func withField(t *testing.T, kind, path string, v any) Resource {
	t.Helper()
	if kind == ruleKind {
		kind, path = "NetworkPolicy", "spec.ingress[]."+path
	}
	b := objectJSON(kind, path, v)
	r, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode(%s): %v", b, err)
	}
	return r
}

// Calico's default value of every refused field is always accepted, and
// so is the field left empty.
func TestRefusedFieldsAcceptCalicoDefault(t *testing.T) {
	for kind, rs := range refusals {
		for _, r := range rs {
			var vals []any
			if r.unmodelled {
				vals = append(vals, "") // unset
			}
			for _, ok := range r.ok {
				vals = append(vals, okValue(ok))
			}
			for _, v := range vals {
				obj := withField(t, kind, r.path, v)
				if p := Unsupported(obj); len(p) != 0 {
					t.Errorf("%s.%s = %v: refused %v", kind, r.path, v, p)
				}
			}
		}
	}
}

// Values compare as Calico's Felix reads them: enumerations in any case,
// durations by length.
func TestRefusalValueComparison(t *testing.T) {
	for _, c := range []struct {
		path    string
		v       any
		refused bool
	}{
		{"spec.bpfKubeProxyMinSyncPeriod", "1000ms", false},
		{"spec.bpfKubeProxyMinSyncPeriod", "2s", true},
		{"spec.nftablesRefreshInterval", "1m30s", false},
		{"spec.bpfEnforceRPF", "loose", false},
		{"spec.bpfEnforceRPF", "Strict", true},
		{"spec.bpfMapSizeRoute", 262144, false},
		{"spec.bpfMapSizeRoute", 1, true},
		{"spec.bpfForceTrackPacketsFromIfaces", []any{"docker+"}, false},
		{"spec.bpfForceTrackPacketsFromIfaces", []any{"docker+", "cni0"}, true},
		{"spec.bpfLogFilters", map[string]any{}, false},
		{"spec.bpfLogFilters", map[string]any{"all": "tcp"}, true},
		{"spec.nftablesMode", "Auto", false},
		{"spec.nftablesMode", "Disabled", false},
		{"spec.nftablesMode", "Enabled", true},
	} {
		obj := withField(t, "FelixConfiguration", c.path, c.v)
		err := obj.Validate()
		refused := err != nil && strings.Contains(err.Error(), c.path+": ") && strings.Contains(err.Error(), "is not supported by this agent")
		if refused != c.refused {
			t.Errorf("%s = %v: Validate = %v, want refused %v", c.path, c.v, err, c.refused)
		}
	}
}

// Nothing allocates from a LoadBalancer pool: the value is refused naming
// the element; Workload and Tunnel pass.
func TestLoadBalancerPoolRefused(t *testing.T) {
	for uses, want := range map[string]string{
		`["LoadBalancer"]`:      `spec.allowedUses[0]: "LoadBalancer" is not supported by this agent`,
		`["Workload","Tunnel"]`: "",
	} {
		r, err := Decode([]byte(`{"kind":"IPPool","metadata":{"name":"p"},"spec":{"cidr":"10.1.0.0/16","allowedUses":` + uses + `}}`))
		if err != nil {
			t.Fatal(err)
		}
		r.Default()
		err = r.Validate()
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("allowedUses %s: Validate = %v, want %q", uses, err, want)
		}
	}
}

// The FelixConfiguration real Calico writes (nftablesMode Auto, bpf*
// defaults) is known, valid and carries nothing unsupported: applying it
// back with calicoctl works.
func TestRecordedFelixConfigurationAccepted(t *testing.T) {
	b, err := os.ReadFile("testdata/felixconfiguration-default-v3.32.1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckKnownFields(j); err != nil {
		t.Errorf("CheckKnownFields: %v", err)
	}
	r, err := Decode(j)
	if err != nil {
		t.Fatal(err)
	}
	r.Default()
	if err := r.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if p := Unsupported(r); len(p) != 0 {
		t.Errorf("Unsupported: %v", p)
	}
}

package apiconfig

import (
	"testing"

	"github.com/calico-aio/calico-aio/store/kdd"
)

// CALICO_API_GROUP (calicoAPIGroup in calicoctl's file) picks the group of
// Calico's CRDs; unset, it is left to the backend's discovery. A bad
// value is refused, naming the variable (TestFromEnvRefusals).
func TestAPIGroupSetting(t *testing.T) {
	for val, want := range map[string]kdd.APIGroup{"": "", "crd.projectcalico.org/v1": kdd.APIGroupV1, "projectcalico.org/v3": kdd.APIGroupV3} {
		env := map[string]string{"DATASTORE_TYPE": "kubernetes", "KUBECONFIG": "/k/config"}
		if val != "" {
			env["CALICO_API_GROUP"] = val
		}
		cfg, err := FromEnv(fakeHost(env, nil), EtcdFlags{})
		if err != nil {
			t.Fatalf("%q: %v", val, err)
		}
		if cfg.APIGroup != want {
			t.Errorf("CALICO_API_GROUP=%q: group %q, want %q", val, cfg.APIGroup, want)
		}
	}
	files := map[string]string{DefaultConfigPath: "apiVersion: projectcalico.org/v3\nkind: CalicoAPIConfig\nspec:\n  datastoreType: kubernetes\n  kubeconfig: /k/config\n  calicoAPIGroup: projectcalico.org/v3\n"}
	cfg, err := FromCalicoctl(fakeHost(nil, files), "", EtcdFlags{})
	if err != nil || cfg.APIGroup != kdd.APIGroupV3 {
		t.Errorf("calicoctl file: %v, %v", cfg, err)
	}
}

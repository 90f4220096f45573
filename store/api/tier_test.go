package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestWellKnownTiersAsCalicoWritesThem compares the tiers calico-node
// ensures at start with the ones real Calico wrote (name, spec, status;
// uid and creationTimestamp are the writer's).
func TestWellKnownTiersAsCalicoWritesThem(t *testing.T) {
	const prefix = "/calico/resources/v3/projectcalico.org/tiers/"
	calico := map[string]string{}
	for _, kv := range readDump(t) {
		if name, ok := strings.CutPrefix(kv.Key, prefix); ok {
			var r struct {
				Spec   json.RawMessage `json:"spec"`
				Status json.RawMessage `json:"status"`
			}
			if err := json.Unmarshal([]byte(kv.Value), &r); err != nil {
				t.Fatal(err)
			}
			calico[name] = string(r.Spec) + " " + string(r.Status)
		}
	}
	ours := WellKnownTiers()
	if len(ours) != len(calico) {
		t.Errorf("%d well-known tiers, Calico wrote %d: %v", len(ours), len(calico), calico)
	}
	for _, tr := range ours {
		if err := tr.Validate(); err != nil {
			t.Errorf("%s: %v", tr.Metadata.Name, err)
		}
		out, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Kind, APIVersion string
			Spec             json.RawMessage `json:"spec"`
			Status           json.RawMessage `json:"status"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		if got := string(r.Spec) + " " + string(r.Status); got != calico[tr.Metadata.Name] {
			t.Errorf("tier %s: ours %s, Calico's %s", tr.Metadata.Name, got, calico[tr.Metadata.Name])
		}
		if r.Kind != "Tier" || r.APIVersion != APIVersion {
			t.Errorf("tier %s: kind %q apiVersion %q", tr.Metadata.Name, r.Kind, r.APIVersion)
		}
	}
	if WellKnownTier("security") != nil {
		t.Error("WellKnownTier(security) is not nil")
	}
}

// Package configtest builds FelixConfiguration objects, and the syncer's
// updates for them, for the tests of the settings and of the agent.
package configtest

import (
	"encoding/json"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/store/api"
)

// Object decodes a FelixConfiguration whose spec has one field set to
// value (JSON).
func Object(t testing.TB, name, field, value string) *api.FelixConfiguration {
	t.Helper()
	var f api.FelixConfiguration
	doc := `{"kind":"FelixConfiguration","apiVersion":"projectcalico.org/v3","metadata":{"name":"` + name + `"},"spec":{"` + field + `":` + value + `}}`
	if err := json.Unmarshal([]byte(doc), &f); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	return &f
}

// Update is the syncer's update for a FelixConfiguration.
func Update(f *api.FelixConfiguration, deleted bool) calc.Update {
	k, _ := api.LookupKind("FelixConfiguration")
	u := calc.Update{Kind: k.Plural, Key: UpdateKey(k, f.Metadata.Name), Deleted: deleted}
	if !deleted {
		u.Resource = f
	}
	return u
}

// UpdateKey is the calculation's key of the cluster-scoped object name of kind k.
func UpdateKey(k api.KindInfo, name string) string {
	return calc.ResourceUpdateKey(k, "", name)
}

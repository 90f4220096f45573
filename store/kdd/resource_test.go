package kdd_test

import (
	"encoding/json"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/kdd"
)

// serverSet is the metadata the API server sets on a custom resource.
var serverSet = []string{"resourceVersion", "generation", "managedFields", "creationTimestamp"}

func resourceKinds() []string {
	var out []string
	for _, k := range kdd.Kinds() {
		if k.Storage == kdd.Resource {
			out = append(out, k.Kind)
		}
	}
	return out
}

// TestRecordedResourcesRoundTrip: every recorded custom resource of a
// resource kind converts to a model and back to the same custom resource,
// and the model keeps its value through our api types.
func TestRecordedResourcesRoundTrip(t *testing.T) {
	n := 0
	for _, kind := range resourceKinds() {
		for _, rec := range recordedObjectsOrNone(t, kind) {
			n++
			r, err := kdd.CRToModel(rec.Object)
			if err != nil {
				t.Errorf("%s@%s: CRToModel: %v", rec.Key, rec.Step, err)
				continue
			}
			back, err := kdd.ModelToCR(r.Model, nil)
			if err != nil {
				t.Errorf("%s@%s: ModelToCR: %v", rec.Key, rec.Step, err)
				continue
			}
			if want := withoutServerFields(t, rec.Object, serverSet...); !sameJSON(t, back, want) {
				t.Errorf("%s@%s: round trip\n got %s\nwant %s\nmodel %s", rec.Key, rec.Step, back, want, r.Model)
			}
			upd, err := kdd.ModelToCR(r.Model, rec.Object)
			if err != nil {
				t.Errorf("%s@%s: ModelToCR(existing): %v", rec.Key, rec.Step, err)
			} else if want := withoutServerFields(t, rec.Object, "generation", "managedFields", "creationTimestamp"); !sameJSON(t, upd, want) {
				t.Errorf("%s@%s: update of the stored CR\n got %s\nwant %s", rec.Key, rec.Step, upd, want)
			}
			checkThroughAPITypes(t, rec, r.Model)
		}
	}
	if n < 25 {
		t.Errorf("only %d recorded resources checked", n)
	}
}

// checkThroughAPITypes: for a kind our api package serves, the model
// decodes and marshals back through our types to a model that converts to
// the recorded custom resource.
func checkThroughAPITypes(t *testing.T, rec recorded, model []byte) {
	t.Helper()
	var tm struct{ Kind string }
	_ = json.Unmarshal(model, &tm)
	if _, served := api.LookupKind(tm.Kind); !served {
		return
	}
	obj, err := api.Decode(model)
	if err != nil {
		t.Errorf("%s@%s: api.Decode: %v\n%s", rec.Key, rec.Step, err, model)
		return
	}
	again, err := api.Marshal(obj)
	if err != nil {
		t.Errorf("%s@%s: api.Marshal: %v", rec.Key, rec.Step, err)
		return
	}
	cr, err := kdd.ModelToCR(again, nil)
	if err != nil {
		t.Errorf("%s@%s: ModelToCR of the api types' model: %v", rec.Key, rec.Step, err)
		return
	}
	want := decodeAny(t, withoutServerFields(t, rec.Object, serverSet...)).(map[string]any)
	wantJSON, _ := json.Marshal(want)
	if !sameJSON(t, cr, wantJSON) {
		t.Errorf("%s@%s: through api types\n got %s\nwant %s", rec.Key, rec.Step, cr, wantJSON)
	}
}

func recordedObjectsOrNone(t *testing.T, kind string) []recorded {
	switch kind {
	case "StagedKubernetesNetworkPolicy":
		return nil // none recorded
	}
	return recordedObjects(t, kind)
}

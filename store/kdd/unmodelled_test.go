package kdd_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/kdd"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// apiModel is a model as our api types write it back.
func apiModel(t *testing.T, model []byte) []byte {
	t.Helper()
	r, err := api.Decode(model)
	if err != nil {
		t.Fatalf("%v: %s", err, model)
	}
	b, err := api.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUnmodelledFieldsSurvive: fields of Calico's objects that our types
// do not model (or that a later Calico adds) go into the custom resource
// and come back; a status the CRD has no place for is refused by name.
func TestUnmodelledFieldsSurvive(t *testing.T) {
	n := 0
	for _, o := range storetest.CalicoObjectsWithUnmodelledFields() {
		var tm struct {
			Kind   string
			Status json.RawMessage
		}
		_ = json.Unmarshal([]byte(o.Value), &tm)
		k, _ := kdd.LookupKind(tm.Kind)
		if k.Storage != kdd.Resource {
			continue
		}
		cr, err := kdd.ModelToCR([]byte(o.Value), nil)
		if len(tm.Status) > 2 && !k.CRStatus {
			if err == nil || !strings.Contains(err.Error(), "status") {
				t.Errorf("%s: status accepted: %s, %v", o.Key, cr, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", o.Key, err)
			continue
		}
		r, err := kdd.CRToModel(cr)
		if err != nil {
			t.Errorf("%s: %v", o.Key, err)
			continue
		}
		n++
		if got, want := apiModel(t, r.Model), apiModel(t, []byte(o.Value)); !sameJSON(t, got, want) {
			t.Errorf("%s:\n got %s\nwant %s\n  cr %s", o.Key, got, want, cr)
		}
	}
	if n < 5 {
		t.Errorf("only %d objects checked", n)
	}
}

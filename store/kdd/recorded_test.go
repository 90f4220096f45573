package kdd_test

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// objects.json is what real Calico v3.32.1 stored in a kube-apiserver
// (kubectl get -o json), one entry per changed version of each object.
//
//go:embed testdata/objects.json
var objectsJSON []byte

// recorded is one recorded version of one object.
type recorded struct {
	Key, Step string
	Object    json.RawMessage
}

// recordedObjects returns every recorded version of the objects of a kind
// ("Tier") or of one object ("Tier/security"), in key then step order.
func recordedObjects(t *testing.T, kind string) []recorded {
	t.Helper()
	var f struct {
		Objects map[string][]struct {
			Step    string          `json:"step"`
			Deleted bool            `json:"deleted"`
			Object  json.RawMessage `json:"object"`
		} `json:"objects"`
	}
	if err := json.Unmarshal(objectsJSON, &f); err != nil {
		t.Fatal(err)
	}
	var out []recorded
	for key, versions := range f.Objects {
		if key != kind && !strings.HasPrefix(key, kind+"/") {
			continue
		}
		for _, v := range versions {
			if !v.Deleted {
				out = append(out, recorded{key, v.Step, v.Object})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key+out[i].Step < out[j].Key+out[j].Step })
	if len(out) == 0 {
		t.Fatalf("no recorded %s", kind)
	}
	return out
}

// decodeAny parses JSON keeping numbers exact.
func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

// sameJSON says whether two JSON texts hold the same value (any key order).
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	return reflect.DeepEqual(decodeAny(t, a), decodeAny(t, b))
}

// withoutServerFields is a recorded custom resource without the metadata
// the API server sets (drop lists the members to remove).
func withoutServerFields(t *testing.T, cr []byte, drop ...string) []byte {
	t.Helper()
	v := decodeAny(t, cr).(map[string]any)
	meta := v["metadata"].(map[string]any)
	for _, k := range drop {
		delete(meta, k)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

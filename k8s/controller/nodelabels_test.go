package controller

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

func TestNodeLabelsFor(t *testing.T) {
	for _, tc := range []struct {
		name           string
		have, recorded map[string]string
		kube           map[string]string
		want           map[string]string
		wantRecorded   string
	}{
		{"first sync keeps hand-set labels", map[string]string{"rr": "true"}, nil, map[string]string{"zone": "a"},
			map[string]string{"rr": "true", "zone": "a"}, `{"zone":"a"}`},
		{"removed from kube: removed", map[string]string{"rr": "true", "zone": "a", "rack": "1"}, map[string]string{"zone": "a", "rack": "1"},
			map[string]string{"zone": "b"}, map[string]string{"rr": "true", "zone": "b"}, `{"zone":"b"}`},
		{"kube wins a shared key", map[string]string{"rr": "true"}, nil, map[string]string{"rr": "false"},
			map[string]string{"rr": "false"}, `{"rr":"false"}`},
		{"kube node with no labels", map[string]string{"zone": "a"}, map[string]string{"zone": "a"}, nil, nil, `{}`},
	} {
		m := api.ObjectMeta{Labels: tc.have}
		if tc.recorded != nil {
			m.Annotations = map[string]string{kubeLabelsAnnotation: mustJSON(t, tc.recorded), "other": "x"}
		}
		labels, ann, err := nodeLabelsFor(m, tc.kube)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(labels, tc.want) || ann[kubeLabelsAnnotation] != tc.wantRecorded {
			t.Errorf("%s: labels %v annotation %q, want %v %q", tc.name, labels, ann[kubeLabelsAnnotation], tc.want, tc.wantRecorded)
		}
		if tc.recorded != nil && ann["other"] != "x" {
			t.Errorf("%s: other annotations lost: %v", tc.name, ann)
		}
	}
	if _, _, err := nodeLabelsFor(api.ObjectMeta{Annotations: map[string]string{kubeLabelsAnnotation: "nope"}}, nil); err == nil {
		t.Error("an unreadable annotation was accepted")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

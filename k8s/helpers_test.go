package k8s

import (
	"bytes"
	"encoding/json"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/calico-aio/calico-aio/store/api"
)

// canonJSON re-encodes JSON (or YAML) with sorted keys and indentation, so
// two documents compare equal exactly when they hold the same values.
func canonJSON(t *testing.T, doc []byte) string {
	t.Helper()
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatalf("bad test document: %v\n%s", err, doc)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("bad test document: %v\n%s", err, doc)
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// assertJSON checks that got marshals to the same JSON as the YAML want.
func assertJSON(t *testing.T, got any, want string) {
	t.Helper()
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	if g, w := canonJSON(t, b), canonJSON(t, []byte(want)); g != w {
		t.Errorf("got\n%s\nwant\n%s", g, w)
	}
}

// assertValid applies Calico's defaults and checks that the datastore
// would accept the object, as a write through store does.
func assertValid(t *testing.T, r api.Resource) {
	t.Helper()
	r.Default()
	if err := r.Validate(); err != nil {
		b, _ := json.Marshal(r)
		t.Errorf("%s fails validation: %v\n%s", r.GetTypeMeta().Kind, err, b)
	}
}

// decodeYAML reads a Kubernetes object written as YAML, as kubectl shows
// it, through the package's JSON field names.
func decodeYAML[T any](t *testing.T, doc string) T {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict([]byte(doc), &v); err != nil {
		t.Fatalf("decoding test input: %v\n%s", err, doc)
	}
	return v
}

func ptr[T any](v T) *T { return &v }

package kdd_test

import (
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/kdd"
)

// On projectcalico.org/v3 the custom resource is the model object: every
// label and annotation on it, no metadata annotation, and none of the
// metadata the API server owns (an update carries the stored object's uid
// and resourceVersion).
func TestModelToCRV3(t *testing.T) {
	model := `{"kind":"NetworkPolicy","apiVersion":"projectcalico.org/v3","metadata":{"name":"default.allow-web","namespace":"ns1","uid":"6c0e2a53-8d1e-4c55-9f57-1f3c7c2d6a01","resourceVersion":"9","generation":3,"creationTimestamp":"2026-11-21T08:30:00Z","labels":{"app":"web","projectcalico.org/tier":"default"},"annotations":{"note":"kept"},"finalizers":["f/x"]},"spec":{"tier":"default","ingress":[{"action":"Allow","source":{},"destination":{"ports":[80]}}]}}`
	got, err := kdd.ModelToCRV3([]byte(model), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"projectcalico.org/v3","kind":"NetworkPolicy","metadata":{"name":"default.allow-web","namespace":"ns1","labels":{"app":"web","projectcalico.org/tier":"default"},"annotations":{"note":"kept"},"finalizers":["f/x"]},"spec":{"ingress":[{"action":"Allow","destination":{"ports":[80]}}],"tier":"default"}}`
	if string(got) != want {
		t.Errorf("create:\n got  %s\n want %s", got, want)
	}
	existing := `{"metadata":{"name":"default.allow-web","namespace":"ns1","uid":"0f0e0d0c-0000-4000-8000-000000000001","resourceVersion":"42"}}`
	got, err = kdd.ModelToCRV3([]byte(model), []byte(existing))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `"namespace":"ns1","uid":"0f0e0d0c-0000-4000-8000-000000000001","resourceVersion":"42","labels"`) {
		t.Errorf("update: %s, want the stored uid and resourceVersion", got)
	}
	for _, bad := range []struct{ model, want string }{
		{`{"kind":"IPPool","apiVersion":"projectcalico.org/v3","metadata":{"name":"p","clusterName":"x"},"spec":{}}`, "metadata.clusterName"},
		{`{"kind":"IPPool","apiVersion":"projectcalico.org/v3","metadata":{"name":"p"},"spec":{},"status":{"x":1}}`, "status"},
		{`{"kind":"IPPool","apiVersion":"projectcalico.org/v3","metadata":{"name":"p","namespace":"ns1"},"spec":{}}`, "metadata.namespace"},
		{`{"kind":"IPAMBlock","apiVersion":"projectcalico.org/v3","metadata":{"name":"p"},"spec":{}}`, "IPAMBlock"},
	} {
		if _, err := kdd.ModelToCRV3([]byte(bad.model), nil); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error naming %s", bad.model, err, bad.want)
		}
	}
}

// A v3 custom resource reads back as itself: the uid as the server gave it
// (not reversed as on v1), its labels and annotations (a
// projectcalico.org/metadata annotation is just an annotation here), less
// resourceVersion and managedFields.
func TestCRV3ToModel(t *testing.T) {
	cr := `{"apiVersion":"projectcalico.org/v3","kind":"IPPool","metadata":{"name":"pool-a","uid":"0f0e0d0c-0000-4000-8000-000000000001","resourceVersion":"42","generation":1,"creationTimestamp":"2026-11-21T08:30:00Z","labels":{"version":"v1"},"annotations":{"projectcalico.org/metadata":"{}"},"managedFields":[{"manager":"calico-aio"}]},"spec":{"cidr":"10.65.0.0/16"}}`
	r, err := kdd.CRV3ToModel([]byte(cr))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"IPPool","apiVersion":"projectcalico.org/v3","metadata":{"name":"pool-a","uid":"0f0e0d0c-0000-4000-8000-000000000001","generation":1,"creationTimestamp":"2026-11-21T08:30:00Z","labels":{"version":"v1"},"annotations":{"projectcalico.org/metadata":"{}"}},"spec":{"cidr":"10.65.0.0/16"}}`
	if string(r.Model) != want || r.ResourceVersion != "42" || r.UID != "0f0e0d0c-0000-4000-8000-000000000001" || r.Name != "pool-a" {
		t.Errorf("got %+v\n model %s\n want  %s", r, r.Model, want)
	}
	v1 := strings.Replace(cr, `"projectcalico.org/v3"`, `"crd.projectcalico.org/v1"`, 1)
	if _, err := kdd.CRV3ToModel([]byte(v1)); err == nil || !strings.Contains(err.Error(), "crd.projectcalico.org/v1") {
		t.Errorf("a v1 custom resource: %v, want refused naming its apiVersion", err)
	}
}

func TestParseAPIGroup(t *testing.T) {
	for in, want := range map[string]kdd.APIGroup{"crd.projectcalico.org/v1": kdd.APIGroupV1, "projectcalico.org/v3": kdd.APIGroupV3} {
		if g, err := kdd.ParseAPIGroup(in); err != nil || g != want {
			t.Errorf("%s: %q, %v", in, g, err)
		}
	}
	for _, bad := range []string{"", "projectcalico.org", "crd.projectcalico.org/v3", "v3"} {
		if _, err := kdd.ParseAPIGroup(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	k, _ := kdd.LookupKind(kdd.KindIPAMHandle)
	if err := kdd.APIGroupV3.Serves(k); err == nil || !strings.Contains(err.Error(), "IPAMHandle") {
		t.Errorf("IPAMHandle on v3: %v", err)
	}
	if err := kdd.APIGroupV1.Serves(k); err != nil {
		t.Errorf("IPAMHandle on v1: %v", err)
	}
}

package kdd_test

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/kdd"
)

// TestKubectlMadeResource: a custom resource written by kubectl (no
// metadata annotation) reads from its own metadata, as calicoctl showed it;
// the next write (calicoctl label env=dev) moves all of it into the
// annotation, exactly as recorded.
func TestKubectlMadeResource(t *testing.T) {
	after := recordedObjects(t, "GlobalNetworkSet/kubectl-made")[0].Object
	var rec struct {
		Metadata struct {
			Annotations map[string]string
			UID         string
		}
	}
	if err := json.Unmarshal(after, &rec); err != nil {
		t.Fatal(err)
	}
	var ann struct{ ManagedFields json.RawMessage }
	if err := json.Unmarshal([]byte(rec.Metadata.Annotations[kdd.MetadataAnnotation]), &ann); err != nil {
		t.Fatal(err)
	}
	// As kubectl created it (kubectl-inputs.yaml), with what the server set.
	before := `{"apiVersion":"crd.projectcalico.org/v1","kind":"GlobalNetworkSet","metadata":{` +
		`"annotations":{"note":"plain"},"creationTimestamp":"2026-11-27T16:45:20Z","generation":1,` +
		`"labels":{"app":"x","zone.projectcalico.org/rack":"r9"},"managedFields":` + string(ann.ManagedFields) +
		`,"name":"kubectl-made","resourceVersion":"178","uid":"` + rec.Metadata.UID + `"},"spec":{"nets":["203.0.113.0/24"]}}`
	r, err := kdd.CRToModel([]byte(before))
	if err != nil {
		t.Fatal(err)
	}
	wantMeta := `{"name":"kubectl-made","uid":"237e78cf-7c4f-41a8-af9e-1cd208c8d911","generation":1,` +
		`"creationTimestamp":"2026-11-27T16:45:20Z","labels":{"app":"x","zone.projectcalico.org/rack":"r9"},` +
		`"annotations":{"note":"plain"},"managedFields":` + string(ann.ManagedFields) + `}`
	var got struct{ Metadata json.RawMessage }
	_ = json.Unmarshal(r.Model, &got)
	if !sameJSON(t, got.Metadata, []byte(wantMeta)) || r.ResourceVersion != "178" || r.UID != rec.Metadata.UID {
		t.Errorf("read %+v\nmetadata %s\nwant     %s", r, got.Metadata, wantMeta)
	}
	obj, err := api.Decode(r.Model)
	if err != nil {
		t.Fatal(err)
	}
	obj.GetObjectMeta().Labels["env"] = "dev" // calicoctl label globalnetworkset kubectl-made env=dev
	model, err := api.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	cr, err := kdd.ModelToCR(model, []byte(before))
	if err != nil {
		t.Fatal(err)
	}
	if want := withoutServerFields(t, after, "generation", "creationTimestamp", "resourceVersion"); !sameJSON(t, withoutServerFields(t, cr, "resourceVersion"), want) {
		t.Errorf("after label\n got %s\nwant %s", cr, want)
	}
}

// TestModelAsCalicoctlShowsIt: the model read from a recorded custom
// resource has the uid, creationTimestamp and status calicoctl printed.
func TestModelAsCalicoctlShowsIt(t *testing.T) {
	r, err := kdd.CRToModel(recordedObjects(t, "Tier/security")[0].Object)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"Tier","apiVersion":"projectcalico.org/v3","metadata":{"name":"security",` +
		`"uid":"632ce8cb-73fd-44e3-912a-cbe08528fd69","creationTimestamp":"2026-11-27T16:44:50Z"},` +
		`"spec":{"defaultAction":"Deny","order":100},"status":{}}`
	if string(r.Model) != want || r.ResourceVersion != "154" {
		t.Errorf("got %s (rv %s)\nwant %s", r.Model, r.ResourceVersion, want)
	}
	r, err = kdd.CRToModel(recordedObjects(t, "NetworkPolicy/shop/allow-web")[0].Object)
	if err != nil || r.Namespace != "shop" || r.Name != "allow-web" || !strings.Contains(string(r.Model), `"uid":"52f91055-9510-487c-aeb6-bd891e15456d"`) {
		t.Errorf("allow-web: %+v, %v", r, err)
	}
}

// TestConversionRefusals: what cannot be converted is refused by name.
func TestConversionRefusals(t *testing.T) {
	const ok = `{"kind":"GlobalNetworkSet","apiVersion":"projectcalico.org/v3","metadata":{"name":"a"},"spec":{}}`
	if _, err := kdd.ModelToCR([]byte(ok), nil); err != nil {
		t.Fatalf("baseline refused: %v", err)
	}
	for _, c := range []struct{ model, want string }{
		{`{"kind":"GlobalNetworkSet","metadata":{"name":"a"},"spec":{},"extra":1}`, "extra"},
		{`{"kind":"Tier","metadata":{"name":"a"},"spec":{},"status":{"conditions":[{"type":"Ready"}]}}`, "status"},
		{`{"kind":"GlobalNetworkSet","metadata":{"name":"a","colour":"red"},"spec":{}}`, "metadata.colour"},
		{`{"kind":"GlobalNetworkSet","metadata":{"name":"a","namespace":"x"},"spec":{}}`, "metadata.namespace"},
		{`{"kind":"NetworkSet","metadata":{"name":"a"},"spec":{}}`, "metadata.namespace"},
		{`{"kind":"GlobalNetworkSet","metadata":{},"spec":{}}`, "metadata.name"},
		{`{"kind":"GlobalNetworkSet","metadata":{"name":"a","uid":"nope"},"spec":{}}`, "metadata.uid"},
		{`{"kind":"IPAMBlock","metadata":{"name":"a"},"spec":{}}`, "IPAMBlock"},
		{`{"kind":"Node","metadata":{"name":"a"},"spec":{}}`, "Node"},
		{`{"kind":"Pod","metadata":{"name":"a"},"spec":{}}`, "Pod"},
		{`{"kind":"GlobalNetworkSet","apiVersion":"v1","metadata":{"name":"a"},"spec":{}}`, "apiVersion"},
	} {
		if _, err := kdd.ModelToCR([]byte(c.model), nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ModelToCR(%s) = %v; want an error naming %s", c.model, err, c.want)
		}
	}
	for _, c := range []struct{ cr, want string }{
		{`{"apiVersion":"projectcalico.org/v3","kind":"Tier","metadata":{"name":"a"}}`, "apiVersion"},
		{`{"apiVersion":"crd.projectcalico.org/v1","kind":"Tier","metadata":{"name":"a","annotations":{"projectcalico.org/metadata":"{\"colour\":1}"}}}`, "colour"},
		{`{"apiVersion":"crd.projectcalico.org/v1","kind":"Tier","metadata":{"name":"a","annotations":{"projectcalico.org/metadata":"{"}}}`, kdd.MetadataAnnotation},
		{`{"apiVersion":"crd.projectcalico.org/v1","kind":"Tier","metadata":{"name":"a","uid":"x"}}`, "metadata.uid"},
		{`{"apiVersion":"crd.projectcalico.org/v1","kind":"Tier","metadata":{"name":"a"},"data":{}}`, "data"},
	} {
		if _, err := kdd.CRToModel([]byte(c.cr)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CRToModel(%s) = %v; want an error naming %s", c.cr, err, c.want)
		}
	}
}

// TestKindsMatchCRDs: every custom resource kind here is one of Calico's
// v1 CRDs with the same plural and scope, and every kind our api package
// serves has a way to be stored.
func TestKindsMatchCRDs(t *testing.T) {
	f, err := os.Open("testdata/crds-v3.32.1.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	crds := map[string][]string{}
	for s := bufio.NewScanner(f); s.Scan(); {
		if c := strings.Split(s.Text(), "\t"); len(c) == 5 && c[2] == kdd.APIVersion {
			crds[c[1]] = c[3:]
		}
	}
	for _, k := range kdd.Kinds() {
		if k.Storage == kdd.Derived {
			continue
		}
		if c, ok := crds[k.Kind]; !ok || c[0] != k.Resource || (c[1] == "Namespaced") != k.Namespaced {
			t.Errorf("%+v: Calico's CRD is %v", k, c)
		}
	}
	for _, k := range api.Kinds() {
		if kk, ok := kdd.LookupKind(k.Kind); !ok || kk.Namespaced != k.Namespaced {
			t.Errorf("api kind %s: %+v, %v", k.Kind, kk, ok)
		}
	}
}

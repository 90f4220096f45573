package kube_test

import (
	"context"
	_ "embed"
	"encoding/json"
	"maps"
	"net/http"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/kdd"
	"github.com/calico-aio/calico-aio/store/model"
)

// objects.json is what real Calico v3.32.1 stored in a kube-apiserver
// (kubectl get -o json), one entry per changed version of each object
// (a copy of store/kdd/testdata/objects.json).
//
//go:embed testdata/objects.json
var objectsJSON []byte

// serverSet are the metadata members the API server sets itself.
var serverSet = []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"}

// recordedCRs are the recorded custom resources, every version, by key.
func recordedCRs(t *testing.T) map[string][]map[string]any {
	t.Helper()
	var f struct {
		Objects map[string][]struct {
			Object json.RawMessage `json:"object"`
		} `json:"objects"`
	}
	if err := json.Unmarshal(objectsJSON, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string][]map[string]any{}
	for key, versions := range f.Objects {
		for _, v := range versions {
			if v.Object == nil {
				continue // deleted at that step
			}
			o := decode(t, v.Object)
			if o["apiVersion"] == kdd.APIVersion {
				out[key] = append(out[key], o)
			}
		}
	}
	return out
}

// clientCopy is a custom resource without what the API server sets.
func clientCopy(o map[string]any) map[string]any {
	out := maps.Clone(o)
	meta := maps.Clone(o["metadata"].(map[string]any))
	for _, k := range serverSet {
		delete(meta, k)
	}
	out["metadata"] = meta
	return out
}

// crPath is a custom resource's path in the API.
func crPath(o map[string]any) string {
	meta := o["metadata"].(map[string]any)
	k, _ := kdd.LookupKind(o["kind"].(string))
	p := "/apis/" + kdd.APIVersion + "/"
	if ns, _ := meta["namespace"].(string); ns != "" {
		p += "namespaces/" + ns + "/"
	}
	return p + k.Resource + "/" + meta["name"].(string)
}

// checkRecorded: every version of every custom resource real Calico
// wrote, stored as recorded, reads through the backend as its model (the
// kdd conversion of what the server holds); and that model, written
// through the backend, is stored exactly as Calico stored it.
func checkRecorded(t *testing.T, c *cluster) {
	recs := recordedCRs(t)
	kinds := map[string]bool{}
	for _, key := range slices.Sorted(maps.Keys(recs)) {
		for i, cr := range recs[key] {
			kinds[cr["kind"].(string)] = true
			t.Run(key+"#"+string(rune('1'+i)), func(t *testing.T) { roundTrip(t, c, cr) })
		}
	}
	for _, k := range kdd.Kinds() {
		if k.Storage != kdd.Derived && k.Kind != "BGPFilter" && !kinds[k.Kind] && !strings.HasPrefix(k.Kind, "StagedKubernetes") {
			t.Errorf("no recorded %s checked", k.Kind)
		}
	}
}

func roundTrip(t *testing.T, c *cluster, rec map[string]any) {
	ctx := context.Background()
	path := crPath(rec)
	coll := path[:strings.LastIndex(path, "/")]
	if code, body := c.kapi.Do(t, http.MethodPost, coll, clientCopy(rec)); code != http.StatusCreated {
		t.Fatalf("POST %s: %d %s", coll, code, body)
	}
	stored := c.raw(t, path)
	kind, _ := kdd.LookupKind(rec["kind"].(string))
	want, key := modelOf(t, kind, stored)
	o, err := c.b.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if !reflect.DeepEqual(decode(t, o.Value), decode(t, want.Value)) || o.Revision != want.Revision {
		t.Errorf("read of the recorded CR %s:\n got  %s at %s\n want %s at %s", path, o.Value, o.Revision, want.Value, want.Revision)
	}
	if err := c.b.Delete(ctx, key, o.Revision); err != nil {
		t.Fatal(err)
	}
	if _, annotated := rec["metadata"].(map[string]any)["annotations"].(map[string]any)[kdd.MetadataAnnotation]; !annotated {
		return // written by kubectl: a Calico write adds the annotation (kdd tests that)
	}
	if _, err := c.b.Create(ctx, key, o.Value); err != nil {
		t.Fatalf("create %s: %v", key, err)
	}
	if got, want := clientCopy(c.raw(t, path)), clientCopy(rec); !reflect.DeepEqual(got, want) {
		t.Errorf("custom resource written for %s:\n got  %s\n want %s", key, jsonText(got), jsonText(want))
	}
	if err := c.b.Delete(ctx, key, ""); err != nil {
		t.Fatal(err)
	}
}

// modelOf is the pure conversion of a stored custom resource, and its key.
func modelOf(t *testing.T, kind kdd.Kind, cr map[string]any) (model.Object, model.Key) {
	t.Helper()
	b, _ := json.Marshal(cr)
	key := model.Key{Kind: kind.Kind}
	var r kdd.Read
	var err error
	switch kind.Kind {
	case kdd.KindIPAMBlock:
		var cidr netip.Prefix
		r, cidr, err = kdd.BlockFromCR(b)
		key.Name = cidr.String()
	case kdd.KindBlockAffinity:
		var cidr netip.Prefix
		r, key.Node, cidr, err = kdd.AffinityFromCR(b)
		key.Name = cidr.String()
	case kdd.KindIPAMHandle:
		r, key.Name, err = kdd.HandleFromCR(b)
	case kdd.KindIPAMConfig:
		r, err = kdd.ConfigFromCR(b)
		key.Name = r.Name
	default:
		r, err = kdd.CRToModel(b)
		key.Namespace, key.Name = r.Namespace, r.Name
	}
	if err != nil {
		t.Fatalf("%s: %v", kind.Kind, err)
	}
	return model.Object{Key: key, Value: r.Model, Revision: model.Revision(r.ResourceVersion)}, key
}

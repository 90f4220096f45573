package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// objectAt reads the object stored under a resource key.
func objectAt(t *testing.T, c *store.Client, key string) api.Resource {
	t.Helper()
	kv, err := storetest.Raw(t, c).GetKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	r, err := store.DecodeObject(store.Object{Value: kv.Value, Revision: etcdv3.FormatRevision(kv.Revision)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rebuilt is r as a writer that builds a fresh object from the fields we
// model would write it: plain JSON through a new object of the kind.
func rebuilt(t *testing.T, r api.Resource) api.Resource {
	t.Helper()
	k, _ := api.LookupKind(r.GetTypeMeta().Kind)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	fresh := k.NewObject()
	if err := json.Unmarshal(b, fresh); err != nil {
		t.Fatal(err)
	}
	fresh.GetObjectMeta().ResourceVersion = ""
	if api.HasUnmodelled(fresh) {
		t.Fatalf("%s: a rebuilt object should carry nothing unmodelled", r.GetObjectMeta().Name)
	}
	return fresh
}

// Objects Calico wrote with fields we do not model keep them, value for
// value, through every store write path: an update of the decoded object,
// an update and an apply of an object rebuilt from the modelled fields only.
func TestStoreWritesKeepUnmodelledFields(t *testing.T) {
	c := storetestClient(t)
	ctx := context.Background()
	for _, o := range storetest.CalicoObjectsWithUnmodelledFields() {
		storetest.PutRaw(t, c, o)
		writers := []struct {
			name  string
			write func(r api.Resource) (api.Resource, error)
		}{
			{"UpdateResource of the decoded object", func(r api.Resource) (api.Resource, error) { return c.UpdateResource(ctx, r) }},
			{"UpdateResource of a rebuilt object", func(r api.Resource) (api.Resource, error) { return c.UpdateResource(ctx, rebuilt(t, r)) }},
			{"ApplyResource of a rebuilt object", func(r api.Resource) (api.Resource, error) { return c.ApplyResource(ctx, rebuilt(t, r)) }},
		}
		for i, w := range writers {
			r := objectAt(t, c, o.Key)
			m := r.GetObjectMeta()
			if m.Labels == nil {
				m.Labels = map[string]string{}
			}
			m.Labels["written-by"] = "writer-" + string(rune('a'+i))
			if _, err := w.write(r); err != nil {
				t.Fatalf("%s %s: %v", w.name, o.Key, err)
			}
			storetest.CheckUnmodelledKept(t, c, o, w.name)
			got, _ := storetest.JSONAt(storetest.StoredJSON(t, c, o.Key), "metadata.labels.written-by")
			if got != m.Labels["written-by"] {
				t.Errorf("%s %s: the modelled change was not written (label %v)", w.name, o.Key, got)
			}
		}
	}
}

// Modelled fields win: clearing the object that held unknown members drops
// them, and an array whose length changed keeps nothing by position.
func TestModelledFieldsWinOverUnmodelled(t *testing.T) {
	c := storetestClient(t)
	ctx := context.Background()
	objs := map[string]storetest.CalicoObject{}
	for _, o := range storetest.CalicoObjectsWithUnmodelledFields() {
		storetest.PutRaw(t, c, o)
		objs[o.Key[strings.LastIndex(o.Key[:strings.LastIndex(o.Key, "/")], "/")+1:]] = o
	}
	node := objs["nodes/node1"]
	r := objectAt(t, c, node.Key)
	r.(*api.Node).Spec.BGP = nil
	if _, err := c.UpdateResource(ctx, r); err != nil {
		t.Fatal(err)
	}
	stored := storetest.StoredJSON(t, c, node.Key)
	if v, ok := storetest.JSONAt(stored, "spec.bgp"); ok {
		t.Errorf("cleared spec.bgp came back as %v", v)
	}
	if _, ok := storetest.JSONAt(stored, "spec.futureSpecField"); !ok {
		t.Errorf("spec.futureSpecField lost with spec.bgp")
	}

	pol := objs["globalnetworkpolicies/allow-web"]
	r = objectAt(t, c, pol.Key)
	gnp := r.(*api.GlobalNetworkPolicy)
	gnp.Spec.Ingress = append([]api.Rule{{Action: "Deny"}}, gnp.Spec.Ingress...)
	if _, err := c.UpdateResource(ctx, r); err != nil {
		t.Fatal(err)
	}
	stored = storetest.StoredJSON(t, c, pol.Key)
	for _, p := range []string{"spec.ingress.0.futureRuleField", "spec.ingress.1.futureRuleField"} {
		if v, ok := storetest.JSONAt(stored, p); ok {
			t.Errorf("%s = %v after the rules changed length; want it dropped", p, v)
		}
	}
}

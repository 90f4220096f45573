package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/etcdv3"
	"github.com/calico-aio/calico-aio/store/storetest"
	"github.com/calico-aio/calico-aio/store/storetest/compat"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// compatDump returns Calico's recorded etcd keys and values.
func compatDump(t *testing.T) []compat.KV {
	t.Helper()
	dump, err := compat.EtcdDump()
	if err != nil {
		t.Fatal(err)
	}
	return dump
}

// What Calico wrote, our store reads; what our store writes back has the
// same key and the same JSON.
func TestStoreReadsAndWritesCalicoValues(t *testing.T) {
	c := storetestClient(t)
	ctx := context.Background()
	n := 0
	for _, kv := range compatDump(t) {
		key, val := kv.Key, kv.Value
		if !strings.HasPrefix(key, etcdv3.ResourcePrefix) {
			continue
		}
		if _, err := storetest.Raw(t, c).CreateKey(ctx, key, []byte(val)); err != nil {
			t.Fatal(err)
		}
		rest := strings.Split(strings.TrimPrefix(key, etcdv3.ResourcePrefix), "/")
		k, ok := api.LookupKind(rest[0])
		if !ok {
			t.Fatalf("%s: unknown plural", key)
		}
		ns, name := "", rest[len(rest)-1]
		if k.Namespaced {
			ns = rest[1]
		}
		r, err := c.GetResource(ctx, k, ns, name)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if r.GetObjectMeta().ResourceVersion == "" {
			t.Errorf("%s: no resourceVersion on read", key)
		}
		if got := etcdv3.ResourceKey(k, r.GetObjectMeta().Namespace, r.GetObjectMeta().Name); got != key {
			t.Errorf("key round trip: %s != %s", got, key)
		}
		// Update through our store (CAS on the read revision), then compare
		// the stored JSON with Calico's.
		if _, err := c.UpdateResource(ctx, r); err != nil {
			t.Fatalf("%s: update: %v", key, err)
		}
		after, err := storetest.Raw(t, c).GetKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var want, got map[string]any
		_ = json.Unmarshal([]byte(val), &want)
		_ = json.Unmarshal(after.Value, &got)
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s: rewritten value differs:\n calico: %s\n ours:   %s", key, val, after.Value)
		}
		n++
	}
	if n < 10 {
		t.Fatalf("only %d resources in the dump", n)
	}
}

// Two writers read the same object; the second write loses with a typed
// conflict, not silently.
func TestConcurrentResourceUpdateConflicts(t *testing.T) {
	c := storetestClient(t)
	ctx := context.Background()
	k, _ := api.LookupKind("IPPool")
	p := k.NewObject().(*api.IPPool)
	p.Metadata.Name = "p"
	p.Spec.CIDR = "10.5.0.0/16"
	if _, err := c.CreateResource(ctx, p); err != nil {
		t.Fatal(err)
	}
	a, _ := c.GetResource(ctx, k, "", "p")
	b, _ := c.GetResource(ctx, k, "", "p")
	a.(*api.IPPool).Spec.NATOutgoing = true
	if _, err := c.UpdateResource(ctx, a); err != nil {
		t.Fatal(err)
	}
	b.(*api.IPPool).Spec.Disabled = true
	_, err := c.UpdateResource(ctx, b)
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second update: %v, want conflict", err)
	}
	got, _ := c.GetResource(ctx, k, "", "p")
	if gp := got.(*api.IPPool); !gp.Spec.NATOutgoing || gp.Spec.Disabled {
		t.Errorf("stored %+v: the first update must win, the second must not apply", gp.Spec)
	}
	// A stale delete also conflicts, by revision or by the object read.
	if _, err := c.DeleteResource(ctx, k, "", "p", "1"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("stale delete: %v", err)
	}
	if _, err := c.DeleteObject(ctx, b); !errors.Is(err, store.ErrConflict) {
		t.Errorf("delete of a stale read: %v", err)
	}
	b.GetObjectMeta().ResourceVersion = "latest"
	if _, err := c.DeleteObject(ctx, b); err == nil || !strings.Contains(err.Error(), "metadata.resourceVersion") {
		t.Errorf("delete with a bad resourceVersion: %v", err)
	}
	cur, _ := c.GetResource(ctx, k, "", "p")
	if _, err := c.DeleteObject(ctx, cur); err != nil {
		t.Errorf("delete of the current read: %v", err)
	}
	if _, err := c.GetResource(ctx, k, "", "p"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
}

func storetestClient(t *testing.T) *store.Client {
	return storetest.StartEtcd(t).Client(t)
}

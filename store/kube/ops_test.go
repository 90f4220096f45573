package kube_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/kdd"
	"github.com/calico-aio/calico-aio/store/kube"
	"github.com/calico-aio/calico-aio/store/model"
)

// TestBackend runs the backend's operations against one real
// kube-apiserver with our CRDs (each subtest on objects of its own).
func TestBackend(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.namespace(t, "ns1")
	c.namespace(t, "shop")
	t.Run("CacheUnready", func(t *testing.T) { checkCacheUnready(t, c) }) // first: no request for the kind before it
	t.Run("CompareAndSwap", func(t *testing.T) {
		for _, s := range samples("cas", 1) {
			t.Run(s.key.String(), func(t *testing.T) { checkCAS(t, c.b, s) })
		}
	})
	t.Run("Recorded", func(t *testing.T) { checkRecorded(t, c) })
	t.Run("AffinitySelector", func(t *testing.T) { checkAffinitySelector(t, c) })
	t.Run("ListSelects", func(t *testing.T) { checkList(t, c.b) })
	t.Run("CommitInOrder", func(t *testing.T) { checkCommit(t, c) })
	t.Run("HandleDeletePreconditions", func(t *testing.T) { checkHandleDelete(t, c) })
	t.Run("Refusals", func(t *testing.T) { checkRefusals(t, c.b) })
	t.Run("Pages", func(t *testing.T) { checkPages(t, c) })
	t.Run("NoDiscoveryOnV1", func(t *testing.T) { checkNoDiscovery(t, c) })
	t.Run("ReadManyConcurrent", func(t *testing.T) { checkReadManyConcurrent(t, c) })
	t.Run("RecentReads", func(t *testing.T) { checkRecentReads(t, c) })
}

// sameModel fails unless got is want, but for metadata.uid: a resource's
// uid is the custom resource's (server-assigned) reversed, so it is only
// checked to be there.
func sameModel(t *testing.T, what string, key model.Key, got, want []byte) {
	t.Helper()
	g, w := decode(t, got), decode(t, want)
	if k, _ := kdd.LookupKind(key.Kind); k.Storage == kdd.Resource {
		gm, _ := g["metadata"].(map[string]any)
		if uid, _ := gm["uid"].(string); len(uid) != 36 {
			t.Errorf("%s: metadata.uid %q, want the custom resource's reversed", what, uid)
		}
		delete(gm, "uid")
		delete(w["metadata"].(map[string]any), "uid")
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got  %s\n want %s", what, jsonText(g), jsonText(w))
	}
}

// checkCAS: create, read, compare-and-swap update and delete, and the
// typed errors of each, naming the key.
func checkCAS(t *testing.T, b *kube.Backend, s sample) {
	checkCASWith(t, b, s, sameModel)
}

// checkCASWith is checkCAS comparing what is read with same.
func checkCASWith(t *testing.T, b *kube.Backend, s sample, same func(t *testing.T, what string, key model.Key, got, want []byte)) {
	ctx := context.Background()
	if _, err := b.Get(ctx, s.key); !isNotFound(err, s.key) {
		t.Errorf("get before create: %v, want a *NotFoundError naming %s", err, s.key)
	}
	rev1, err := b.Create(ctx, s.key, s.value(1))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	_, err = b.Create(ctx, s.key, s.value(1))
	var ae *model.AlreadyExistsError
	if !errors.As(err, &ae) || ae.Key != s.key {
		t.Errorf("second create: %v, want an *AlreadyExistsError naming %s", err, s.key)
	}
	o, err := b.Get(ctx, s.key)
	if err != nil || o.Key != s.key || o.Revision != rev1 {
		t.Fatalf("get = %s at %q, %v; want %s at %q", o.Key, o.Revision, err, s.key, rev1)
	}
	same(t, "read after create", s.key, o.Value, s.value(1))
	rev2, err := b.Update(ctx, s.key, s.value(2), rev1)
	if err != nil || rev2 == rev1 {
		t.Fatalf("update at the read revision: %q, %v", rev2, err)
	}
	_, err = b.Update(ctx, s.key, s.value(3), rev1)
	var ce *model.ConflictError
	if !errors.As(err, &ce) || ce.Key != s.key || ce.Expected != rev1 {
		t.Errorf("update at a stale revision: %v, want a *ConflictError naming %s at %s", err, s.key, rev1)
	}
	if err := b.Delete(ctx, s.key, rev1); !errors.Is(err, model.ErrConflict) {
		t.Errorf("delete at a stale revision: %v, want a conflict", err)
	}
	if _, err := b.Update(ctx, s.key, s.value(3), "12x"); !errors.Is(err, model.ErrInvalidRevision) {
		t.Errorf("update at revision 12x: %v, want ErrInvalidRevision", err)
	}
	o, err = b.Get(ctx, s.key)
	if err != nil || o.Revision != rev2 {
		t.Fatalf("get after the lost writes: %q, %v; want %q", o.Revision, err, rev2)
	}
	same(t, "read after update", s.key, o.Value, s.value(2))
	if s.key.Kind == "KubeControllersConfiguration" {
		rev2 = checkStatusCleared(t, b, s, rev2)
	}
	if err := b.Delete(ctx, s.key, rev2); err != nil {
		t.Fatalf("delete at the current revision: %v", err)
	}
	if err := b.Delete(ctx, s.key, ""); !isNotFound(err, s.key) {
		t.Errorf("delete of a deleted object: %v, want not found", err)
	}
	if _, err := b.Update(ctx, s.key, s.value(4), rev2); !isNotFound(err, s.key) {
		t.Errorf("update of a deleted object: %v, want not found", err)
	}
	if _, err := b.Create(ctx, s.key, s.value(5)); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, s.key, ""); err != nil {
		t.Errorf("delete without a revision: %v", err)
	}
}

func isNotFound(err error, k model.Key) bool {
	var nf *model.NotFoundError
	return errors.As(err, &nf) && nf.Key == k
}

// mustCreate creates s at version v.
func mustCreate(t *testing.T, b *kube.Backend, s sample, v int) model.Revision {
	t.Helper()
	rev, err := b.Create(context.Background(), s.key, s.value(v))
	if err != nil {
		t.Fatalf("create %s: %v", s.key, err)
	}
	return rev
}

// requestObject decodes an audited request body.
func requestObject(t *testing.T, ev auditEvent, out any) {
	t.Helper()
	if err := json.Unmarshal(ev.RequestObject, out); err != nil {
		t.Fatalf("audited %s %s: %v: %s", ev.Verb, ev.RequestURI, err, ev.RequestObject)
	}
}

// checkStatusCleared: a write without the status clears the stored one.
func checkStatusCleared(t *testing.T, b *kube.Backend, s sample, rev model.Revision) model.Revision {
	t.Helper()
	v := decode(t, s.value(2))
	delete(v, "status")
	value, _ := json.Marshal(v)
	rev, err := b.Update(context.Background(), s.key, value, rev)
	if err != nil {
		t.Fatal(err)
	}
	o, err := b.Get(context.Background(), s.key)
	if err != nil || strings.Contains(string(o.Value), "environmentVars") {
		t.Errorf("read after clearing the status: %s, %v", o.Value, err)
	}
	return rev
}

package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/calico-aio/calico-aio/store"
)

// Subject is one backend under test, on a datastore of its own.
type Subject struct {
	Backend store.Backend
	// Restart, when set, stops the datastore and starts it again with the
	// same data (a server restart a watch must resume across).
	Restart func(t testing.TB)
}

// RunBackendConformance runs the contract's checks (store.Backend) against
// the backends newSubject makes: each call an empty datastore, closed when
// the test ends. Both datastores run it.
func RunBackendConformance(t *testing.T, newSubject func(t *testing.T) Subject) {
	t.Run("CreateGetUpdateDelete", func(t *testing.T) { t.Parallel(); forEachSample(t, newSubject(t).Backend, checkLifecycle) })
	t.Run("TypedErrorsNameTheKey", func(t *testing.T) { t.Parallel(); forEachSample(t, newSubject(t).Backend, checkTypedErrors) })
	t.Run("ListSelects", func(t *testing.T) { t.Parallel(); checkList(t, newSubject(t).Backend) })
	t.Run("ReadMany", func(t *testing.T) { t.Parallel(); checkReadMany(t, newSubject(t).Backend) })
	t.Run("WatchListsThenFollows", func(t *testing.T) { t.Parallel(); checkWatch(t, newSubject(t).Backend) })
	t.Run("WatchResumesAfterRestart", func(t *testing.T) {
		t.Parallel()
		s := newSubject(t)
		if s.Restart == nil {
			t.Log("this backend's harness cannot restart its datastore")
			return
		}
		checkWatchResumes(t, s)
	})
	t.Run("Commit", func(t *testing.T) { t.Parallel(); checkCommit(t, newSubject(t).Backend) })
	t.Run("CommitLosesPrecondition", func(t *testing.T) { t.Parallel(); checkCommitConflict(t, newSubject(t).Backend) })
}

func forEachSample(t *testing.T, b store.Backend, check func(*testing.T, store.Backend, sample)) {
	for _, s := range samples() {
		t.Run(s.key.String(), func(t *testing.T) { check(t, b, s) })
	}
}

// sameJSON fails unless got and want are the same JSON value.
func sameJSON(t testing.TB, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: stored value is not JSON: %v: %s", what, err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: sample is not JSON: %v", what, err)
	}
	if !reflect.DeepEqual(withoutUID(g), withoutUID(w)) {
		t.Errorf("%s:\n got  %s\n want %s", what, got, want)
	}
}

// withoutUID is a value without its metadata.uid: a Kubernetes datastore
// assigns its own (the custom resource's, bits reversed), as Calico's.
func withoutUID(v any) any {
	if m, ok := v.(map[string]any); ok {
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "uid")
		}
	}
	return v
}

func mustCreate(t testing.TB, b store.Backend, s sample, v int) store.Revision {
	t.Helper()
	rev, err := b.Create(context.Background(), s.key, s.value(v))
	if err != nil {
		t.Fatalf("create %s: %v", s.key, err)
	}
	if rev == "" {
		t.Fatalf("create %s: empty revision", s.key)
	}
	return rev
}

func checkLifecycle(t *testing.T, b store.Backend, s sample) {
	ctx := context.Background()
	rev1 := mustCreate(t, b, s, 1)
	o, err := b.Get(ctx, s.key)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if o.Key != s.key || o.Revision != rev1 {
		t.Errorf("get = %s at %q, want %s at %q", o.Key, o.Revision, s.key, rev1)
	}
	sameJSON(t, "read after create", o.Value, s.value(1))
	rev2, err := b.Update(ctx, s.key, s.value(2), rev1)
	if err != nil {
		t.Fatalf("update at the read revision: %v", err)
	}
	if rev2 == rev1 || rev2 == "" {
		t.Errorf("update returned revision %q after %q", rev2, rev1)
	}
	if _, err := b.Update(ctx, s.key, s.value(3), rev1); !errors.Is(err, store.ErrConflict) {
		t.Errorf("update at a stale revision: %v, want a conflict", err)
	}
	if err := b.Delete(ctx, s.key, rev1); !errors.Is(err, store.ErrConflict) {
		t.Errorf("delete at a stale revision: %v, want a conflict", err)
	}
	o, err = b.Get(ctx, s.key)
	if err != nil || o.Revision != rev2 {
		t.Fatalf("get after the lost writes: %q, %v; want revision %q", o.Revision, err, rev2)
	}
	sameJSON(t, "read after update", o.Value, s.value(2))
	if err := b.Delete(ctx, s.key, rev2); err != nil {
		t.Fatalf("delete at the current revision: %v", err)
	}
	if _, err := b.Get(ctx, s.key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get after delete: %v, want not found", err)
	}
	// Without a precondition, a delete removes whatever is stored.
	mustCreate(t, b, s, 4)
	if err := b.Delete(ctx, s.key, ""); err != nil {
		t.Errorf("delete without revision: %v", err)
	}
}

func checkTypedErrors(t *testing.T, b store.Backend, s sample) {
	ctx := context.Background()
	_, err := b.Get(ctx, s.key)
	var nf *store.NotFoundError
	if !errors.As(err, &nf) || nf.Key != s.key {
		t.Errorf("get of a missing object: %v, want a *NotFoundError naming %s", err, s.key)
	}
	if err := b.Delete(ctx, s.key, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete of a missing object: %v, want not found", err)
	}
	rev := mustCreate(t, b, s, 1)
	_, err = b.Create(ctx, s.key, s.value(2))
	var ae *store.AlreadyExistsError
	if !errors.As(err, &ae) || ae.Key != s.key {
		t.Errorf("second create: %v, want an *AlreadyExistsError naming %s", err, s.key)
	}
	rev2, err := b.Update(ctx, s.key, s.value(2), rev)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Update(ctx, s.key, s.value(3), rev)
	var ce *store.ConflictError
	if !errors.As(err, &ce) || ce.Key != s.key {
		t.Errorf("stale update: %v, want a *ConflictError naming %s", err, s.key)
	} else if ce.Current != nil && ce.Current.Revision != rev2 {
		t.Errorf("conflict carries revision %q, want the stored %q", ce.Current.Revision, rev2)
	}
	if err := b.Delete(ctx, s.key, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(ctx, s.key, s.value(4), rev2); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of a deleted object: %v, want not found", err)
	}
}

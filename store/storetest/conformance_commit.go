package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/calico-aio/calico-aio/store"
)

var (
	commitHandle   = sample{store.Key{Kind: store.KindIPAMHandle, Name: "k8s-pod-network.c9"}, handleJSON("10.65.0.0/26")}
	commitBlock    = sample{store.Key{Kind: store.KindIPAMBlock, Name: "10.65.0.0/26"}, blockJSON("10.65.0.0/26", "node-a")}
	commitAffinity = sample{store.Key{Kind: store.KindBlockAffinity, Node: "node-a", Name: "10.65.0.0/26"}, affinityJSON}
)

func put(s sample, v int, rev store.Revision) store.Write {
	return store.Write{Op: store.OpPut, Key: s.key, Value: s.value(v), Revision: rev}
}

func revisionOf(t testing.TB, b store.Backend, k store.Key) store.Revision {
	t.Helper()
	o, err := b.Get(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	return o.Revision
}

// checkCommit applies an assign (handle then block), then a release
// (block then handle, the handle deleted).
func checkCommit(t *testing.T, b store.Backend) {
	ctx := context.Background()
	blockRev := mustCreate(t, b, commitBlock, 1)
	mustCreate(t, b, commitAffinity, 2)
	revs, err := b.Commit(ctx, []store.Write{put(commitHandle, 1, ""), put(commitBlock, 2, blockRev)})
	if err != nil || len(revs) != 2 {
		t.Fatalf("assign commit = %v, %v; want 2 applied", revs, err)
	}
	o, err := b.Get(ctx, commitBlock.key)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "block after the assign", o.Value, commitBlock.value(2))
	h, err := b.Get(ctx, commitHandle.key)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "handle after the assign", h.Value, commitHandle.value(1))
	// Each put's revision is the one a read gives.
	if revs[0] != h.Revision || revs[1] != o.Revision {
		t.Errorf("assign commit revisions %v, want the handle's and the block's as read: [%s %s]", revs, h.Revision, o.Revision)
	}
	revs, err = b.Commit(ctx, []store.Write{
		put(commitBlock, 3, o.Revision),
		{Op: store.OpDelete, Key: commitHandle.key, Revision: h.Revision},
	})
	if err != nil || len(revs) != 2 {
		t.Fatalf("release commit = %v, %v; want 2 applied", revs, err)
	}
	if got := revisionOf(t, b, commitBlock.key); revs[0] != got || revs[1] != "" {
		t.Errorf("release commit revisions %v, want [%s \"\"] (the block's as read, none for a delete)", revs, got)
	}
	if _, err := b.Get(ctx, commitHandle.key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("handle after the release: %v, want not found", err)
	}
	if revs, err := b.Commit(ctx, nil); len(revs) != 0 || err != nil {
		t.Errorf("empty commit = %v, %v", revs, err)
	}
}

// checkCommitConflict: the handle write is fine, the block write's
// revision is stale. An atomic backend applies nothing; another applies
// the handle only, in order, and stops.
func checkCommitConflict(t *testing.T, b store.Backend) {
	ctx := context.Background()
	stale := mustCreate(t, b, commitBlock, 1)
	cur, err := b.Update(ctx, commitBlock.key, commitBlock.value(2), stale)
	if err != nil {
		t.Fatal(err)
	}
	revs, err := b.Commit(ctx, []store.Write{put(commitHandle, 1, ""), put(commitBlock, 3, stale)})
	n := len(revs)
	var ce *store.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrConflict) {
		t.Fatalf("commit with a stale block: %v, want a *ConflictError", err)
	}
	if ce.Key != commitBlock.key {
		t.Errorf("conflict names %s, want the block %s", ce.Key, commitBlock.key)
	}
	if got := revisionOf(t, b, commitBlock.key); got != cur {
		t.Errorf("block revision %q after the lost commit, want it untouched at %q", got, cur)
	}
	_, herr := b.Get(ctx, commitHandle.key)
	if b.Atomic() {
		if n != 0 || !errors.Is(herr, store.ErrNotFound) {
			t.Errorf("atomic commit applied %d writes (handle read: %v); want none", n, herr)
		}
	} else if n != 1 || herr != nil {
		t.Errorf("commit applied %d writes (handle read: %v); want the handle only", n, herr)
	}
	// A create precondition loses when the object exists.
	if _, err := b.Commit(ctx, []store.Write{put(commitBlock, 4, "")}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("commit creating an existing block: %v, want a conflict", err)
	}
}

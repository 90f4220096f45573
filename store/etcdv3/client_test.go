package etcdv3_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/etcdv3"
	"github.com/calico-aio/calico-aio/store/storetest"
)

func TestCASPrimitives(t *testing.T) {
	e := storetest.StartEtcd(t)
	c := e.Backend(t)
	ctx := context.Background()

	rev, err := c.CreateKey(ctx, "/t/a", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateKey(ctx, "/t/a", []byte("2")); !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("second create: %v, want already exists", err)
	}
	rev2, err := c.UpdateKey(ctx, "/t/a", []byte("2"), rev)
	if err != nil {
		t.Fatal(err)
	}
	// A stale revision loses, and the error carries the current value.
	_, err = c.UpdateKey(ctx, "/t/a", []byte("3"), rev)
	var ce *store.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale update: %v, want conflict", err)
	}
	if ce.Current == nil || string(ce.Current.Value) != "2" || ce.Current.Revision != etcdv3.FormatRevision(rev2) {
		t.Fatalf("conflict current = %+v, want value 2 at %d", ce.Current, rev2)
	}
	if err := c.DeleteKey(ctx, "/t/a", rev); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale delete: %v", err)
	}
	if err := c.DeleteKey(ctx, "/t/a", rev2); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetKey(ctx, "/t/a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := c.DeleteKey(ctx, "/t/a", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete missing: %v", err)
	}
	if _, err := c.UpdateKey(ctx, "/t/a", []byte("x"), rev2); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update missing: %v", err)
	}
}

// Many writers increment one counter by compare-and-swap: no update is lost.
func TestConcurrentCASLosesNoUpdate(t *testing.T) {
	e := storetest.StartEtcd(t)
	c := e.Backend(t)
	ctx := context.Background()
	n := store.Key{Kind: store.KindIPAMHandle, Name: "n"}
	if _, err := c.Create(ctx, n, []byte{0}); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 25
	var conflicts atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				o, err := c.Get(ctx, n)
				for err == nil {
					_, err = c.Update(ctx, n, []byte{o.Value[0] + 1}, o.Revision)
					var ce *store.ConflictError
					if errors.As(err, &ce) {
						conflicts.Add(1)
						o, err = *ce.Current, nil
						continue
					}
					break
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	o, err := c.Get(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if got := int(o.Value[0]); got != writers*each {
		t.Fatalf("counter = %d, want %d", got, writers*each)
	}
	if conflicts.Load() == 0 {
		t.Log("no conflicts observed (writers did not overlap)")
	}
}

func TestUnreachableEtcdFailsWithinTimeout(t *testing.T) {
	c, err := etcdv3.New(etcdv3.Config{Endpoints: []string{"http://127.0.0.1:1"}, RequestTimeout: 500e6})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.GetKey(context.Background(), "/x"); err == nil {
		t.Fatal("get against a closed port succeeded")
	}
}

package ipam_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// handleBlocks is a stored handle's per-block counts.
func handleBlocks(t *testing.T, c *store.Client, id string) map[string]int {
	t.Helper()
	o, err := c.Get(ctx, store.Key{Kind: store.KindIPAMHandle, Name: id})
	if err != nil {
		t.Fatal(err)
	}
	var h ipam.Handle
	if err := json.Unmarshal(o.Value, &h); err != nil {
		t.Fatal(err)
	}
	return h.Block
}

// On a datastore that commits one object at a time (the Kubernetes API),
// an assign writes the handle before the block, as Calico's IPAM does; when
// the block write then loses to another writer, the handle's increment is
// taken back before the retry, so the handle counts exactly the addresses
// its blocks hold.
func TestNonAtomicAssignUndoesHandleIncrement(t *testing.T) {
	e := newEnv(t)
	e.pool("p4", "10.10.0.0/24")
	e.mustAssign("node1", "net.a", 1, 0) // claims the node's block
	na := &storetest.NonAtomic{Backend: e.c.Backend}
	var order []string
	na.BeforeWrite = func(ctx context.Context, i int, w store.Write) {
		order = append(order, w.Key.Kind)
		if w.Key.Kind != store.KindIPAMBlock || len(order) > 2 {
			return
		}
		// Another writer changes the block between the handle write and
		// the block write of the first attempt.
		o, err := e.c.Get(ctx, w.Key)
		if err == nil {
			_, err = e.c.Update(ctx, w.Key, o.Value, o.Revision)
		}
		if err != nil {
			t.Error(err)
		}
	}
	al := ipam.New(store.NewClient(na))
	got, err := al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "net.b", Node: "node1"})
	if err != nil || len(got.IPv4) != 1 {
		t.Fatalf("assign: %v %v", got, err)
	}
	if want := []string{store.KindIPAMHandle, store.KindIPAMBlock, store.KindIPAMHandle, store.KindIPAMBlock}; !reflect.DeepEqual(order, want) {
		t.Errorf("writes in order %v, want the handle before the block on each attempt: %v", order, want)
	}
	if st := al.Stats(); st.Conflicts != 1 {
		t.Errorf("%d conflicts, want the one injected", st.Conflicts)
	}
	if h := handleBlocks(t, e.c, "net.b"); !reflect.DeepEqual(h, map[string]int{"10.10.0.0/26": 1}) {
		t.Errorf("handle net.b = %v, want one address in 10.10.0.0/26 (the lost attempt's increment undone)", h)
	}
	addrs, err := e.al.IPsByHandle(ctx, "net.b")
	if err != nil || len(addrs) != 1 {
		t.Errorf("addresses of net.b = %v, %v; want the one assigned", addrs, err)
	}
}

// A claim that finds its pending affinity already written (an earlier
// claim of this node stopped after that step) finishes it: the block is
// created and the affinity confirmed by compare-and-swap on what is stored.
func TestClaimFinishesAnEarlierPendingAffinity(t *testing.T) {
	e := newEnv(t)
	e.pool("p4", "10.10.0.0/26")
	aff := store.Key{Kind: store.KindBlockAffinity, Node: "node1", Name: "10.10.0.0/26"}
	if _, err := e.c.Create(ctx, aff, []byte(`{"state":"pending","deleted":false}`)); err != nil {
		t.Fatal(err)
	}
	got := e.mustAssign("node1", "net.a", 1, 0)
	if len(got.IPv4) != 1 || !got.IPv4[0].Addr().Is4() {
		t.Fatalf("assigned %v", got)
	}
	o, err := e.c.Get(ctx, aff)
	if err != nil {
		t.Fatal(err)
	}
	if string(o.Value) != `{"state":"confirmed","deleted":false}` {
		t.Errorf("affinity = %s, want confirmed", o.Value)
	}
}

// ReleaseByHandleThen calls its hook once the blocks are written: on a
// datastore without transactions before the handle's own writes (the CNI
// plugin lets the node's IPAM lock go there), on etcd after the one
// transaction.
func TestReleaseByHandleThen(t *testing.T) {
	e := newEnv(t)
	e.pool("p4", "10.10.0.0/24")
	na := &storetest.NonAtomic{Backend: e.c.Backend}
	var order []string
	na.BeforeWrite = func(ctx context.Context, i int, w store.Write) { order = append(order, w.Key.Kind) }
	al := ipam.New(store.NewClient(na))
	if _, err := al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "net.a", Node: "node1"}); err != nil {
		t.Fatal(err)
	}
	order = nil
	handleAtHook := false
	freed, err := al.ReleaseByHandleThen(ctx, "net.a", func() {
		order = append(order, "done")
		_, err := e.c.Get(ctx, store.Key{Kind: store.KindIPAMHandle, Name: "net.a"})
		handleAtHook = err == nil
	})
	if err != nil || len(freed) != 1 {
		t.Fatalf("release: %v %v", freed, err)
	}
	if want := []string{store.KindIPAMBlock, "done"}; !reflect.DeepEqual(order, want) || !handleAtHook {
		t.Errorf("non-atomic release: writes and hook %v, handle stored at the hook %v; want %v, true", order, handleAtHook, want)
	}
	if _, err := e.c.Get(ctx, store.Key{Kind: store.KindIPAMHandle, Name: "net.a"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("handle net.a after the release: %v, want it deleted", err)
	}

	e.mustAssign("node1", "net.b", 1, 0)
	done := 0
	if freed, err := e.al.ReleaseByHandleThen(ctx, "net.b", func() { done++ }); err != nil || len(freed) != 1 || done != 1 {
		t.Errorf("atomic release: freed %v, %v; hook called %d times, want once", freed, err, done)
	}
	if ips, err := e.al.IPsByHandle(ctx, "net.b"); err != nil || len(ips) != 0 {
		t.Errorf("net.b still holds %v (%v)", ips, err)
	}
	done = 0
	if _, err := e.al.ReleaseByHandleThen(ctx, "net.none", func() { done++ }); err != nil || done != 0 {
		t.Errorf("release of a missing handle: %v, hook called %d times", err, done)
	}
}

package ipam_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/etcdv3"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// writeLog is a datastore without transactions (storetest.NonAtomic over
// the test's etcd) that notes every write as "<op> <kind> <detail>",
// detail being an affinity's state or "deleted" for a handle so marked.
type writeLog struct {
	*storetest.NonAtomic
	writes []string
}

func newWriteLog(e *env) *writeLog {
	l := &writeLog{NonAtomic: &storetest.NonAtomic{Backend: e.c.Backend}}
	l.BeforeWrite = func(_ context.Context, _ int, w store.Write) {
		switch {
		case w.Op == store.OpDelete:
			l.note("delete", w.Key, nil)
		case w.Revision == "":
			l.note("create", w.Key, w.Value)
		default:
			l.note("update", w.Key, w.Value)
		}
	}
	return l
}

func (l *writeLog) note(op string, k store.Key, val []byte) {
	var v struct {
		State   string
		Deleted bool
	}
	_ = json.Unmarshal(val, &v)
	s := op + " " + k.Kind
	if k.Kind == store.KindBlockAffinity {
		s += " " + v.State
	}
	if k.Kind == store.KindIPAMHandle && v.Deleted {
		s += " deleted"
	}
	l.writes = append(l.writes, s)
}

// take returns the writes noted since the last take.
func (l *writeLog) take() []string {
	out := l.writes
	l.writes = nil
	return out
}

func (l *writeLog) Create(ctx context.Context, k store.Key, v []byte) (store.Revision, error) {
	l.note("create", k, v)
	return l.NonAtomic.Create(ctx, k, v)
}

func (l *writeLog) Update(ctx context.Context, k store.Key, v []byte, rev store.Revision) (store.Revision, error) {
	l.note("update", k, v)
	return l.NonAtomic.Update(ctx, k, v, rev)
}

func (l *writeLog) Delete(ctx context.Context, k store.Key, rev store.Revision) error {
	l.note("delete", k, nil)
	return l.NonAtomic.Delete(ctx, k, rev)
}

// On a datastore without transactions the IPAM writes Calico's objects in
// Calico's order (recorded from real calico-ipam on a kube-apiserver,
// e2e/testdata/kdd/api-calls.json): a first assignment on a node creates
// IPAMConfig default, claims a block (affinity pending, pending again
// once no block is found, block, affinity confirmed), then the handle
// before the block; a later one the handle before the block; a release the
// block, then the handle marked deleted, then its delete.
func TestNonAtomicWritesInCalicosOrder(t *testing.T) {
	e := newEnv(t)
	e.pool("p4", "10.10.0.0/24")
	l := newWriteLog(e)
	al := ipam.New(store.NewClient(l))
	assign := func(handle string) {
		t.Helper()
		if _, err := al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: handle, Node: "node1"}); err != nil {
			t.Fatal(err)
		}
	}
	assign("net.a")
	want := []string{
		"create IPAMConfig",
		"create BlockAffinity pending", "update BlockAffinity pending", "create IPAMBlock", "update BlockAffinity confirmed",
		"create IPAMHandle", "update IPAMBlock",
	}
	if got := l.take(); !slices.Equal(got, want) {
		t.Errorf("first assignment on a node wrote\n  %s\nwant Calico's\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	assign("net.b")
	if got, want := l.take(), []string{"create IPAMHandle", "update IPAMBlock"}; !slices.Equal(got, want) {
		t.Errorf("later assignment wrote %v, want Calico's %v", got, want)
	}
	if _, err := al.ReleaseByHandle(ctx, "net.b"); err != nil {
		t.Fatal(err)
	}
	if got, want := l.take(), []string{"update IPAMBlock", "update IPAMHandle deleted", "delete IPAMHandle"}; !slices.Equal(got, want) {
		t.Errorf("release wrote %v, want Calico's %v", got, want)
	}
	if _, err := e.c.Get(ctx, store.Key{Kind: store.KindIPAMHandle, Name: "net.b"}); err == nil {
		t.Error("released handle still stored")
	}
	// Releasing a single address that empties its handle deletes the
	// handle the same way.
	addrs, err := al.IPsByHandle(ctx, "net.a")
	if err != nil || len(addrs) != 1 {
		t.Fatalf("addresses of net.a: %v %v", addrs, err)
	}
	if _, err := al.ReleaseIPs(ctx, []ipam.ReleaseOptions{{Addr: addrs[0]}}); err != nil {
		t.Fatal(err)
	}
	if got, want := l.take(), []string{"update IPAMBlock", "update IPAMHandle deleted", "delete IPAMHandle"}; !slices.Equal(got, want) {
		t.Errorf("release of an address wrote %v, want %v", got, want)
	}
}

// The first assignment stores IPAMConfig default as Calico's does (in
// etcd exactly the value real Calico stored); one already stored is left
// as it is and honoured.
func TestFirstAssignmentStoresIPAMConfig(t *testing.T) {
	e := newEnv(t)
	e.pool("p4", "10.10.0.0/24")
	e.mustAssign("node1", "net.a", 1, 0)
	kv, err := storetest.Raw(t, e.c).GetKey(ctx, etcdv3.IPAMConfigKey)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(kv.Value), `{"auto_allocate_blocks":true,"kubeVirtVMAddressPersistence":"Enabled"}`; got != want {
		t.Errorf("IPAM config %s, want Calico's %s", got, want)
	}

	e2 := newEnv(t)
	e2.pool("p4", "10.10.0.0/24")
	if _, err := e2.al.SetConfig(ctx, func(c *ipam.Config) { c.AutoAllocateBlocks = false; c.StrictAffinity = true }); err != nil {
		t.Fatal(err)
	}
	if _, err := e2.assign("node1", "net.a", 1, 0); err == nil {
		t.Error("assignment claimed a block with autoAllocateBlocks false")
	}
	if cfg, err := e2.al.GetConfig(ctx); err != nil || cfg.AutoAllocateBlocks || !cfg.StrictAffinity {
		t.Errorf("stored config became %+v, %v", cfg, err)
	}
}

// A handle marked deleted (another writer's release, Calico's first step
// of a delete, stopped there) reads as absent, and the reader finishes the
// delete, as Calico's does: an assignment to the same handle never updates
// the marked handle (the delete that follows would take the new
// address's count with it) but creates a new one.
func TestAssignFinishesTheDeleteOfAMarkedHandle(t *testing.T) {
	e := newEnv(t)
	e.pool("p4", "10.10.0.0/24")
	e.mustAssign("node1", "net.warm", 1, 0)
	hkey := store.Key{Kind: store.KindIPAMHandle, Name: "net.a"}
	if _, err := e.c.Create(ctx, hkey, []byte(`{"block":{},"deleted":true}`)); err != nil {
		t.Fatal(err)
	}
	na := &storetest.NonAtomic{Backend: e.c.Backend}
	var handleWrites []store.Write
	na.BeforeWrite = func(ctx context.Context, _ int, w store.Write) {
		if w.Key.Kind == store.KindIPAMHandle {
			handleWrites = append(handleWrites, w)
		}
	}
	al := ipam.New(store.NewClient(na))
	got, err := al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "net.a", Node: "node1"})
	if err != nil || len(got.IPv4) != 1 {
		t.Fatalf("assign: %v %v", got, err)
	}
	if len(handleWrites) != 1 || handleWrites[0].Op != store.OpPut || handleWrites[0].Revision != "" {
		t.Errorf("handle writes %+v, want one create (the marked handle read as absent and its delete finished)", handleWrites)
	}
	if st := al.Stats(); st.Conflicts != 0 {
		t.Errorf("%d conflicts, want none", st.Conflicts)
	}
	if h := handleBlocks(t, e.c, "net.a"); len(h) != 1 {
		t.Errorf("handle net.a = %v, want the one address", h)
	}
	if ips, err := e.al.IPsByHandle(ctx, "net.a"); err != nil || len(ips) != 1 || ips[0] != got.IPv4[0].Addr() {
		t.Errorf("addresses of net.a = %v, %v; want %v", ips, err, got.IPv4[0].Addr())
	}
}

// A release that finds its handle marked deleted frees nothing and
// finishes the delete.
func TestReleaseOfAMarkedHandleFinishesItsDelete(t *testing.T) {
	e := newEnv(t)
	hkey := store.Key{Kind: store.KindIPAMHandle, Name: "net.a"}
	if _, err := e.c.Create(ctx, hkey, []byte(`{"block":{},"deleted":true}`)); err != nil {
		t.Fatal(err)
	}
	al := ipam.New(store.NewClient(&storetest.NonAtomic{Backend: e.c.Backend}))
	if freed, err := al.ReleaseByHandle(ctx, "net.a"); err != nil || len(freed) != 0 {
		t.Errorf("release = %v, %v; want nothing freed", freed, err)
	}
	if _, err := e.c.Get(ctx, hkey); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("marked handle after the release: %v, want it deleted", err)
	}
}

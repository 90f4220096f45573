package ipam_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/calico-aio/calico-aio/store/etcdv3"
	"github.com/calico-aio/calico-aio/store/storetest"
	"github.com/calico-aio/calico-aio/store/storetest/compat"
)

// loadCalicoDump writes every key of Calico's own etcd dump into the store.
func loadCalicoDump(t *testing.T, e *env) map[string]string {
	t.Helper()
	dump, err := compat.EtcdDump()
	if err != nil {
		t.Fatal(err)
	}
	kv := map[string]string{}
	for _, d := range dump {
		kv[d.Key] = d.Value
		if _, err := storetest.Raw(t, e.c).CreateKey(ctx, d.Key, []byte(d.Value)); err != nil {
			t.Fatal(err)
		}
	}
	return kv
}

// Calico's stored IPAM state is read, allocated from and released into,
// and what we write back keeps Calico's shapes.
func TestAllocateFromCalicosStoredState(t *testing.T) {
	e := newEnv(t)
	dump := loadCalicoDump(t, e)
	blockKey := "/calico/ipam/v2/assignment/ipv4/block/10.48.166.128-26"

	// node1's first affine block has free ordinals; Calico's FIFO says 24 is next.
	got := e.mustAssign("node1", "refnet.ours", 1, 1)
	if want := netip.MustParsePrefix("10.48.166.152/26"); got.IPv4[0] != want {
		t.Errorf("IPv4 = %v, want %v (head of Calico's unallocated list)", got.IPv4[0], want)
	}
	if want := netip.MustParsePrefix("fd00:48:0:df9b:fa8:334a:557b:7742/122"); got.IPv6[0] != want {
		t.Errorf("IPv6 = %v, want %v", got.IPv6[0], want)
	}
	// No new block was claimed: node1 already had room.
	blocks, err := e.al.ListBlocks(ctx)
	if err != nil || len(blocks) != 5 {
		t.Fatalf("blocks = %d, %v", len(blocks), err)
	}

	// Release one of Calico's own allocations by its handle.
	freed, err := e.al.ReleaseByHandle(ctx, "refnet.refc000aaaa0000000000000000000000")
	if err != nil || len(freed) != 1 || freed[0] != netip.MustParseAddr("10.48.166.130") {
		t.Fatalf("release Calico handle: %v %v", freed, err)
	}

	// The rewritten block has exactly Calico's field set.
	var before, after map[string]any
	_ = json.Unmarshal([]byte(dump[blockKey]), &before)
	kv, err := storetest.Raw(t, e.c).GetKey(ctx, blockKey)
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(kv.Value, &after)
	if keysOf(before) != keysOf(after) {
		t.Errorf("block fields changed: %s -> %s", keysOf(before), keysOf(after))
	}
	attrs := after["attributes"].([]any)
	for _, a := range attrs {
		m := a.(map[string]any)
		if _, ok := m["handle_id"]; !ok {
			t.Errorf("attribute without handle_id: %v", m)
		}
	}
	if _, err := storetest.Raw(t, e.c).GetKey(ctx, etcdv3.HandleKey("refnet.refc000aaaa0000000000000000000000")); err == nil {
		t.Errorf("released handle still stored")
	}
}

func keysOf(m map[string]any) string { return fmt.Sprint(slices.Sorted(maps.Keys(m))) }

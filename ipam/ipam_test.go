package ipam_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
	"github.com/calico-aio/calico-aio/store/storetest"
)

var ctx = context.Background()

type env struct {
	t  *testing.T
	c  *store.Client
	al *ipam.Allocator
}

func newEnv(t *testing.T) *env {
	c := storetest.StartEtcd(t).Client(t)
	return &env{t: t, c: c, al: ipam.New(c)}
}

func (e *env) pool(name, cidr string, mutate ...func(*api.IPPool)) {
	e.t.Helper()
	k, _ := api.LookupKind("IPPool")
	p := k.NewObject().(*api.IPPool)
	p.Metadata.Name = name
	p.Spec.CIDR = cidr
	for _, m := range mutate {
		m(p)
	}
	if _, err := e.c.CreateResource(ctx, p); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) assign(node, handle string, n4, n6 int) (ipam.Assigned, error) {
	return e.al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: n4, Num6: n6, HandleID: handle, Node: node})
}

func (e *env) mustAssign(node, handle string, n4, n6 int) ipam.Assigned {
	e.t.Helper()
	got, err := e.assign(node, handle, n4, n6)
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

func (e *env) raw(key string) map[string]any {
	e.t.Helper()
	kv, err := storetest.Raw(e.t, e.c).GetKey(ctx, key)
	if err != nil {
		e.t.Fatalf("%s: %v", key, err)
	}
	var m map[string]any
	if err := json.Unmarshal(kv.Value, &m); err != nil {
		e.t.Fatal(err)
	}
	return m
}

func TestAutoAssignClaimsBlockInCalicoLayout(t *testing.T) {
	e := newEnv(t)
	e.pool("p4", "10.10.0.0/24")
	got := e.mustAssign("node1", "net.c1", 1, 0)
	if len(got.IPv4) != 1 || got.IPv4[0].Bits() != 26 || !netip.MustParsePrefix("10.10.0.0/24").Contains(got.IPv4[0].Addr()) {
		t.Fatalf("assigned %v", got.IPv4)
	}
	block := netip.PrefixFrom(got.IPv4[0].Addr(), 26).Masked()
	aff := e.raw(etcdv3.AffinityKey("node1", block))
	if aff["state"] != "confirmed" || aff["deleted"] != false {
		t.Errorf("affinity = %v", aff)
	}
	b := e.raw(etcdv3.BlockKey(block))
	if b["affinity"] != "host:node1" || b["cidr"] != block.String() {
		t.Errorf("block = %v", b)
	}
	if allocs := b["allocations"].([]any); len(allocs) != 64 {
		t.Errorf("allocations has %d entries", len(allocs))
	}
	attrs := b["attributes"].([]any)[0].(map[string]any)
	if attrs["handle_id"] != "net.c1" || attrs["secondary"].(map[string]any)["node"] != "node1" {
		t.Errorf("attributes = %v", attrs)
	}
	h := e.raw(etcdv3.HandleKey("net.c1"))
	if h["block"].(map[string]any)[block.String()] != float64(1) {
		t.Errorf("handle = %v", h)
	}
}

func TestSteadyStateAllocationCostsThreeRoundTrips(t *testing.T) {
	e := newEnv(t)
	e.pool("p4", "10.10.0.0/24")
	e.pool("p6", "fd00:10::/64")
	e.mustAssign("node1", "net.warm", 1, 1)
	before := e.al.Stats().RoundTrips
	e.mustAssign("node1", "net.c2", 1, 1)
	if rt := e.al.Stats().RoundTrips - before; rt != 3 {
		t.Errorf("steady-state dual-stack allocation took %d etcd round trips, want 3", rt)
	}
	before = e.al.Stats().RoundTrips
	if _, err := e.al.ReleaseByHandle(ctx, "net.c2"); err != nil {
		t.Fatal(err)
	}
	if rt := e.al.Stats().RoundTrips - before; rt != 3 {
		t.Errorf("release by handle took %d round trips, want 3", rt)
	}
}

func TestDualStackAndReleaseByHandle(t *testing.T) {
	e := newEnv(t)
	e.pool("p4", "10.10.0.0/24")
	e.pool("p6", "fd00:10::/64")
	got := e.mustAssign("node1", "net.c1", 1, 1)
	if len(got.IPv4) != 1 || len(got.IPv6) != 1 || got.IPv6[0].Bits() != 122 {
		t.Fatalf("assigned %+v", got)
	}
	ips, err := e.al.IPsByHandle(ctx, "net.c1")
	if err != nil || len(ips) != 2 {
		t.Fatalf("IPsByHandle = %v, %v", ips, err)
	}
	freed, err := e.al.ReleaseByHandle(ctx, "net.c1")
	if err != nil || len(freed) != 2 {
		t.Fatalf("release = %v, %v", freed, err)
	}
	if _, err := storetest.Raw(t, e.c).GetKey(ctx, etcdv3.HandleKey("net.c1")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("handle still there: %v", err)
	}
	// Releasing again is a no-op.
	if freed, err := e.al.ReleaseByHandle(ctx, "net.c1"); err != nil || len(freed) != 0 {
		t.Errorf("second release = %v, %v", freed, err)
	}
	// The freed address goes to the back of the queue: the next one differs.
	next := e.mustAssign("node1", "net.c3", 1, 0)
	if next.IPv4[0] == got.IPv4[0] {
		t.Errorf("freed address %v reused at once", next.IPv4[0])
	}
}

func TestExhaustionNamesThePool(t *testing.T) {
	e := newEnv(t)
	e.pool("tiny", "10.20.0.0/28", func(p *api.IPPool) { p.Spec.BlockSize = 28 })
	for i := 0; i < 16; i++ {
		e.mustAssign("node1", "net.h"+string(rune('a'+i)), 1, 0)
	}
	_, err := e.assign("node1", "net.last", 1, 0)
	if !errors.Is(err, ipam.ErrExhausted) || !strings.Contains(err.Error(), "tiny (10.20.0.0/28)") {
		t.Fatalf("17th allocation: %v", err)
	}
	if _, err := storetest.Raw(t, e.c).GetKey(ctx, etcdv3.HandleKey("net.last")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("failed allocation left a handle: %v", err)
	}
}

func TestBorrowingAndStrictAffinity(t *testing.T) {
	e := newEnv(t)
	e.pool("one-block", "10.30.0.0/26")
	a := e.mustAssign("node1", "net.a", 1, 0)
	// node2 cannot claim a block (the pool has one): it borrows from node1's.
	b := e.mustAssign("node2", "net.b", 1, 0)
	if b.IPv4[0].Masked() != a.IPv4[0].Masked() {
		t.Fatalf("node2 got %v outside node1's block %v", b.IPv4[0], a.IPv4[0].Masked())
	}
	blocks, _ := e.al.ListBlocks(ctx)
	if len(blocks) != 1 {
		t.Fatalf("%d blocks", len(blocks))
	}
	var borrowedBy string
	for _, al := range blocks[0].Allocations() {
		if al.Handle == "net.b" {
			borrowedBy = al.Attrs["node"]
		}
	}
	if borrowedBy != "node2" {
		t.Errorf("borrowed allocation attributes node = %q", borrowedBy)
	}
	if _, err := e.al.SetConfig(ctx, func(c *ipam.Config) { c.StrictAffinity = true }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.assign("node2", "net.c", 1, 0); !errors.Is(err, ipam.ErrExhausted) {
		t.Fatalf("strict affinity: %v, want exhausted", err)
	}
}

func TestMaxBlocksPerHost(t *testing.T) {
	e := newEnv(t)
	e.pool("p", "10.40.0.0/24", func(p *api.IPPool) { p.Spec.BlockSize = 28 })
	if _, err := e.al.SetConfig(ctx, func(c *ipam.Config) { c.MaxBlocksPerHost = 1; c.StrictAffinity = true }); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 16; i++ {
		e.mustAssign("node1", "net.m"+string(rune('a'+i)), 1, 0)
	}
	if _, err := e.assign("node1", "net.over", 1, 0); !errors.Is(err, ipam.ErrExhausted) || !strings.Contains(err.Error(), "maxBlocksPerHost=1") {
		t.Fatalf("over the block limit: %v", err)
	}
	affs, _ := e.al.ListAffinities(ctx)
	if len(affs) != 1 {
		t.Errorf("node holds %d blocks, want 1", len(affs))
	}
	// Without strict affinity the node borrows from another node's block.
	e.mustAssign("node2", "net.n2", 1, 0)
	if _, err := e.al.SetConfig(ctx, func(c *ipam.Config) { c.StrictAffinity = false }); err != nil {
		t.Fatal(err)
	}
	e.mustAssign("node1", "net.borrow", 1, 0)
}

func TestPoolSelection(t *testing.T) {
	e := newEnv(t)
	e.pool("off", "10.50.0.0/24", func(p *api.IPPool) { p.Spec.Disabled = true })
	e.pool("rack2", "10.51.0.0/24", func(p *api.IPPool) { p.Spec.NodeSelector = `rack == "2"` })
	e.pool("tunnel", "10.52.0.0/24", func(p *api.IPPool) { p.Spec.AllowedUses = []api.IPPoolAllowedUse{api.IPPoolAllowedUseTunnel} })
	e.pool("manual", "10.54.0.0/24", func(p *api.IPPool) { p.Spec.AssignmentMode = api.AssignmentModeManual })
	e.pool("main", "10.53.0.0/24")
	for i := 0; i < 5; i++ {
		got := e.mustAssign("node1", "net.s"+string(rune('a'+i)), 1, 0)
		if !netip.MustParsePrefix("10.53.0.0/24").Contains(got.IPv4[0].Addr()) {
			t.Fatalf("got %v: not from the only eligible pool", got.IPv4[0])
		}
	}
	cases := map[string]string{"off": "is disabled", "rack2": "does not select node", "nope": "does not exist", "tunnel": "does not allow use"}
	for pool, want := range cases {
		_, err := e.al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "net.r", Node: "node1", IPv4Pools: []string{pool}})
		if !errors.Is(err, ipam.ErrNoPool) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), pool) {
			t.Errorf("requesting %s: %v", pool, err)
		}
	}
	// A Manual pool serves only who asks for it.
	got, err := e.al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "net.manual", Node: "node1", IPv4Pools: []string{"manual"}})
	if err != nil || !netip.MustParsePrefix("10.54.0.0/24").Contains(got.IPv4[0].Addr()) {
		t.Errorf("requesting the Manual pool: %v %v", got, err)
	}
	// Requested by CIDR.
	got, err = e.al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "net.cidr", Node: "node1", IPv4Pools: []string{"10.53.0.0/24"}})
	if err != nil || !netip.MustParsePrefix("10.53.0.0/24").Contains(got.IPv4[0].Addr()) {
		t.Errorf("by CIDR: %v %v", got, err)
	}
	// A labelled node may use the rack pool.
	k, _ := api.LookupKind("Node")
	n := k.NewObject()
	n.GetObjectMeta().Name, n.GetObjectMeta().Labels = "node2", map[string]string{"rack": "2"}
	if _, err := e.c.CreateResource(ctx, n); err != nil {
		t.Fatal(err)
	}
	if _, err := e.al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "net.rack", Node: "node2", IPv4Pools: []string{"rack2"}}); err != nil {
		t.Errorf("labelled node: %v", err)
	}
}

func TestAssignSpecificIP(t *testing.T) {
	e := newEnv(t)
	e.pool("p", "10.60.0.0/24")
	ip := netip.MustParseAddr("10.60.0.77")
	got, err := e.al.AssignIP(ctx, ipam.AssignIPArgs{Addr: ip, HandleID: "net.x", Node: "node1"})
	if err != nil || got != netip.MustParsePrefix("10.60.0.77/26") {
		t.Fatalf("assign = %v, %v", got, err)
	}
	var inUse *ipam.InUseError
	if _, err := e.al.AssignIP(ctx, ipam.AssignIPArgs{Addr: ip, HandleID: "net.y", Node: "node1"}); !errors.As(err, &inUse) || inUse.Handle != "net.x" {
		t.Errorf("taken address: %v", err)
	}
	var notIn *ipam.NotInPoolError
	if _, err := e.al.AssignIP(ctx, ipam.AssignIPArgs{Addr: netip.MustParseAddr("192.0.2.1"), HandleID: "net.z", Node: "node1"}); !errors.As(err, &notIn) {
		t.Errorf("outside pools: %v", err)
	}
	if _, err := storetest.Raw(t, e.c).GetKey(ctx, etcdv3.HandleKey("net.y")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("refused assignment left a handle")
	}
}

func TestStaleReleaseFreesNothing(t *testing.T) {
	e := newEnv(t)
	e.pool("p", "10.70.0.0/30", func(p *api.IPPool) { p.Spec.BlockSize = 32 })
	first := e.mustAssign("node1", "net.old", 1, 0).IPv4[0].Addr()
	blocks, _ := e.al.ListBlocks(ctx)
	oldSeq := blocks[0].Allocations()[0].SequenceNumber
	if _, err := e.al.ReleaseByHandle(ctx, "net.old"); err != nil {
		t.Fatal(err)
	}
	// Only one /32 block exists per address; the same address is handed out again.
	again, err := e.al.AssignIP(ctx, ipam.AssignIPArgs{Addr: first, HandleID: "net.new", Node: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	left, err := e.al.ReleaseIPs(ctx, []ipam.ReleaseOptions{{Addr: again.Addr(), SequenceNumber: &oldSeq}})
	if err != nil || len(left) != 1 {
		t.Fatalf("stale release: left %v, %v", left, err)
	}
	if ips, _ := e.al.IPsByHandle(ctx, "net.new"); len(ips) != 1 {
		t.Errorf("the new owner lost its address: %v", ips)
	}
	// The right sequence number frees it and fixes the handle.
	blocks, _ = e.al.ListBlocks(ctx)
	var cur uint64
	for _, b := range blocks {
		for _, al := range b.Allocations() {
			if al.Addr == first {
				cur = al.SequenceNumber
			}
		}
	}
	if left, err := e.al.ReleaseIPs(ctx, []ipam.ReleaseOptions{{Addr: first, SequenceNumber: &cur}}); err != nil || len(left) != 0 {
		t.Fatalf("release: %v %v", left, err)
	}
	if _, err := storetest.Raw(t, e.c).GetKey(ctx, etcdv3.HandleKey("net.new")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("handle not removed: %v", err)
	}
}

func TestReleaseNodeAffinities(t *testing.T) {
	e := newEnv(t)
	e.pool("p", "10.80.0.0/24")
	e.mustAssign("node1", "net.keep", 1, 0)
	e.mustAssign("node2", "net.gone", 1, 0)
	if _, err := e.al.ReleaseByHandle(ctx, "net.gone"); err != nil {
		t.Fatal(err)
	}
	n, err := e.al.ReleaseNodeAffinities(ctx, "node2", true)
	if err != nil || n != 1 {
		t.Fatalf("release node2: %d %v", n, err)
	}
	if n, _ := e.al.ReleaseNodeAffinities(ctx, "node1", true); n != 0 {
		t.Errorf("released node1's block in use")
	}
	blocks, _ := e.al.ListBlocks(ctx)
	affs, _ := e.al.ListAffinities(ctx)
	if len(blocks) != 1 || len(affs) != 1 || affs[0].Node != "node1" {
		t.Errorf("left blocks %d, affinities %+v", len(blocks), affs)
	}
	// Forced: the block in use loses its affinity, the address stays.
	if n, _ := e.al.ReleaseNodeAffinities(ctx, "node1", false); n != 1 {
		t.Errorf("forced release: %d", n)
	}
	if ips, _ := e.al.IPsByHandle(ctx, "net.keep"); len(ips) != 1 {
		t.Errorf("address lost: %v", ips)
	}
}

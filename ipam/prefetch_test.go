package ipam_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// TestPrefetchIsCurrentOrRetried: a snapshot prefetched before another
// assignment changed the node's block is as if read then: the assignment
// that uses it loses the block's compare-and-swap, reads again and takes
// another address, with no duplicate. A prefetch for another handle is
// not used.
func TestPrefetchIsCurrentOrRetried(t *testing.T) {
	e := newEnv(t)
	e.pool("p4", "10.10.0.0/24")
	hints := ipam.NewBlockHints() // the block is read with the snapshot
	first, err := ipam.New(e.c).WithHints(hints).AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "net.warm", Node: "node1"})
	if err != nil {
		t.Fatal(err)
	}

	al := ipam.New(e.c).WithHints(hints)
	al.Prefetch(store.RecentReads(ctx), "node1", "net.c2")
	al.WaitPrefetch()
	other := e.mustAssign("node1", "net.other", 1, 0) // after the prefetch's read
	got, err := al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "net.c2", Node: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	if got.IPv4[0] == other.IPv4[0] || got.IPv4[0] == first.IPv4[0] {
		t.Errorf("prefetched assignment took %v, also held by %v / %v", got.IPv4[0], first.IPv4[0], other.IPv4[0])
	}
	if st := al.Stats(); st.Conflicts != 1 {
		t.Errorf("%d conflicts, want 1: the prefetched block was stale (%+v)", st.Conflicts, st)
	}

	al = ipam.New(e.c)
	al.Prefetch(store.RecentReads(ctx), "node1", "net.elsewhere")
	if _, err := al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "net.c3", Node: "node1"}); err != nil {
		t.Fatal(err)
	}
	ips, err := e.al.IPsByHandle(ctx, "net.elsewhere")
	if err != nil || len(ips) != 0 {
		t.Errorf("a prefetch for net.elsewhere allocated %v (%v)", ips, err)
	}
}

// A burst: several assignments of one process (the agent, one BlockHints)
// prefetch at once, then assign in turn (under the CNI plugin's IPAM
// lock). Each takes the block as the ones before it left it since its
// prefetch (the value written, at the revision the write returned), so
// none loses its compare-and-swap and none reads it again: on a datastore
// that commits one object at a time (Kubernetes) a lost write would cost
// the handle's undo and a new snapshot. The addresses are distinct. A
// write whose outcome is not known (it failed) makes the next one read
// the block again.
func TestPrefetchTakesBlocksAsWrittenSince(t *testing.T) {
	e := newEnv(t)
	e.pool("p4", "10.10.0.0/24")
	na := &storetest.NonAtomic{Backend: e.c.Backend}
	c := store.NewClient(na)
	hints := ipam.NewBlockHints()
	if _, err := ipam.New(c).WithHints(hints).AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "net.warm", Node: "node1"}); err != nil {
		t.Fatal(err)
	}
	const burst = 5
	als := make([]*ipam.Allocator, burst)
	for i := range als {
		als[i] = ipam.New(c).WithHints(hints)
		als[i].Prefetch(store.RecentReads(ctx), "node1", fmt.Sprintf("net.b%d", i))
	}
	seen := map[netip.Prefix]string{}
	for i, al := range als {
		al.WaitPrefetch()
		h := fmt.Sprintf("net.b%d", i)
		got, err := al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: h, Node: "node1"})
		if err != nil {
			t.Fatal(err)
		}
		if other, dup := seen[got.IPv4[0]]; dup {
			t.Errorf("%s and %s both hold %v", other, h, got.IPv4[0])
		}
		seen[got.IPv4[0]] = h
		// The snapshot with the hinted block, then the handle and the block.
		if st := al.Stats(); st.Conflicts != 0 || st.RoundTrips != 2 {
			t.Errorf("%s: %+v, want no conflict and 2 round trips: the block as written since its prefetch", h, st)
		}
	}

	// A write that fails (here: its context ends before the block's write)
	// leaves the block's state unknown to the hints: read again.
	next := ipam.New(c).WithHints(hints)
	next.Prefetch(store.RecentReads(ctx), "node1", "net.next")
	next.WaitPrefetch()
	failing, cancel := context.WithCancel(ctx)
	na.BeforeWrite = func(_ context.Context, _ int, w store.Write) {
		if w.Key.Kind == store.KindIPAMBlock {
			cancel()
		}
	}
	if _, err := ipam.New(c).WithHints(hints).AutoAssign(failing, ipam.AutoAssignArgs{Num4: 1, HandleID: "net.failed", Node: "node1"}); err == nil {
		t.Fatal("an assignment whose block write was cancelled succeeded")
	}
	na.BeforeWrite = nil
	if _, err := next.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "net.next", Node: "node1"}); err != nil {
		t.Fatal(err)
	}
	if st := next.Stats(); st.Conflicts != 0 || st.RoundTrips != 3 {
		t.Errorf("after a failed write: %+v, want no conflict and 3 round trips (the block read again)", st)
	}
}

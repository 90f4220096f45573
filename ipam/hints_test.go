package ipam_test

import (
	"net/netip"
	"testing"

	"github.com/calico-aio/calico-aio/ipam"
)

// TestBlockHints: an allocator sharing hints across calls (the agent's)
// reads the node's blocks with its snapshot: a steady-state dual-stack
// assignment costs two round trips instead of three. A hinted block the
// node no longer holds is read but not used: the next address comes from
// a block the node holds now.
func TestBlockHints(t *testing.T) {
	e := newEnv(t)
	e.pool("p4", "10.10.0.0/24")
	e.pool("p6", "fd00:10::/64")
	hints := ipam.NewBlockHints()
	call := func() *ipam.Allocator { return ipam.New(e.c).WithHints(hints) } // one allocator per call, as the agent's
	assign := func(al *ipam.Allocator, node, handle string) ipam.Assigned {
		t.Helper()
		got, err := al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, Num6: 1, HandleID: handle, Node: node})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	first := assign(call(), "node1", "net.warm")
	al := call()
	assign(al, "node1", "net.c2")
	if rt := al.Stats().RoundTrips; rt != 2 {
		t.Errorf("steady-state dual-stack allocation with hints took %d round trips, want 2", rt)
	}

	// node1 gives its blocks up; its hints still name them. The next
	// assignment claims blocks again (it does not take the hinted ones as
	// the node's), and the one after is back to two round trips.
	for _, h := range []string{"net.warm", "net.c2"} {
		if _, err := e.al.ReleaseByHandle(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := e.al.ReleaseNodeAffinities(ctx, "node1", true); err != nil || n != 2 {
		t.Fatalf("released %d affinities: %v", n, err)
	}
	assign(call(), "node1", "net.c3")
	al = call()
	assign(al, "node1", "net.c4")
	if rt := al.Stats().RoundTrips; rt != 2 {
		t.Errorf("after the node's blocks changed: %d round trips, want 2", rt)
	}
	if _, err := ipam.New(e.c).ReleaseByHandle(ctx, "net.c3"); err != nil {
		t.Fatal(err)
	}
	if first.IPv4[0] == (netip.Prefix{}) {
		t.Fatal("no first address")
	}
}

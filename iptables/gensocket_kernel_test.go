package iptables

import (
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/internal/nstest"
)

// TestKeptGenerationSocket: the generation read over Sessions' kept socket
// is the one a fresh socket reads, moves with a commit, and follows the
// calling thread into another namespace (the socket is made again there).
func TestKeptGenerationSocket(t *testing.T) {
	nstest.NeedKernel(t, "iptables-save", "iptables-restore")
	a, b := nstest.NewNS(t), nstest.NewNS(t)
	s := NewSessions()
	defer s.Close()
	gen := func(kept bool) func() (uint32, error) {
		if kept {
			return s.generation
		}
		return nftGeneration
	}
	read := func(t *testing.T, kept bool, n ns.NetNS) uint32 {
		t.Helper()
		return in(t, n, gen(kept))
	}
	before := read(t, true, a)
	if fresh := read(t, false, a); fresh != before {
		t.Fatalf("kept socket read generation %d, a fresh one %d", before, fresh)
	}
	tb := NewTable("filter", 4, TableOptions{Hooks: map[string]string{"FORWARD": "cali-FORWARD"}, Sessions: s})
	tb.SetChains(endpointTable(1, false))
	applyIn(t, a, tb)
	after := read(t, true, a)
	if after == before {
		t.Fatalf("the generation did not move with a commit: %d", after)
	}
	if fresh := read(t, false, a); fresh != after {
		t.Fatalf("after a commit the kept socket read %d, a fresh one %d", after, fresh)
	}
	inB := read(t, true, b)
	if fresh := read(t, false, b); inB != fresh || inB == after {
		t.Fatalf("in another namespace the kept socket read %d, a fresh one %d (the first namespace is at %d)", inB, fresh, after)
	}
}

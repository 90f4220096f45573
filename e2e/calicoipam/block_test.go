package calicoipam

import (
	"net/netip"
	"slices"
	"testing"
	"time"
)

// TestBlockBookkeeping: allocation skips reserved addresses and takes
// ordinals first in, first out; release sends ordinals to the end of
// unallocated, renumbers the attributes left and counts one sequence step
// per allocation and per release, keeping sequenceNumberForAllocation.
func TestBlockBookkeeping(t *testing.T) {
	cidr := netip.MustParsePrefix("10.244.0.0/26")
	now := time.Unix(1700000000, 5)
	b := newBlock(cidr, "node1", false, now)
	s := &b.Spec
	start := s.SequenceNumber
	if start != uint64(now.UnixNano()) || *s.Affinity != "host:node1" || s.AffinityClaimTime != "2023-11-14T22:13:20Z" ||
		len(s.Allocations) != 64 || len(s.Unallocated) != 64 || b.Metadata.Name != "10-244-0-0-26" {
		t.Fatalf("new block: %+v", b)
	}
	reserved := func(a netip.Addr) bool { return a == netip.MustParseAddr("10.244.0.1") }
	var got []netip.Addr
	for _, h := range []string{"a", "b", "c"} {
		a, ok, err := s.allocate(h, secondary{"pod": h}, reserved)
		if err != nil || !ok {
			t.Fatalf("allocate %s: %v %v", h, ok, err)
		}
		got = append(got, a)
	}
	if want := []netip.Addr{netip.MustParseAddr("10.244.0.0"), netip.MustParseAddr("10.244.0.2"), netip.MustParseAddr("10.244.0.3")}; !slices.Equal(got, want) {
		t.Errorf("allocated %v, want %v (10.244.0.1 reserved)", got, want)
	}
	if s.SequenceNumber != start+3 || s.SequenceNumberForAllocation["2"] != start+1 || s.Unallocated[0] != 1 {
		t.Errorf("after 3 allocations: sequence %d (start %d), per ordinal %v, unallocated %v", s.SequenceNumber, start, s.SequenceNumberForAllocation, s.Unallocated[:3])
	}

	if n := s.release("a"); n != 1 {
		t.Fatalf("release a freed %d", n)
	}
	if n := s.release("a"); n != 0 {
		t.Fatalf("release a again freed %d", n)
	}
	if s.Allocations[0] != nil || *s.Allocations[2] != 0 || *s.Allocations[3] != 1 || len(s.Attributes) != 2 ||
		s.Attributes[0].HandleID != "b" || s.Unallocated[len(s.Unallocated)-1] != 0 {
		t.Errorf("after releasing a: allocations %v, attributes %+v, unallocated tail %v", s.Allocations[:4], s.Attributes, s.Unallocated[len(s.Unallocated)-2:])
	}
	if s.SequenceNumber != start+4 || s.SequenceNumberForAllocation["0"] != start {
		t.Errorf("after the release: sequence %d (start %d), per ordinal %v", s.SequenceNumber, start, s.SequenceNumberForAllocation)
	}
	for range 61 {
		if _, ok, err := s.allocate("d", secondary{}, reserved); !ok || err != nil {
			t.Fatalf("filling the block: %v %v", ok, err)
		}
	}
	if _, ok, err := s.allocate("e", secondary{}, reserved); ok || err != nil || s.inUse() != 63 {
		t.Errorf("full block (one address reserved): ok %v, err %v, in use %d", ok, err, s.inUse())
	}
}

package calicoipam

import (
	"net/netip"
	"slices"
	"strings"
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

// ipamState are the stored IPAM objects an audit reads.
type ipamState struct {
	blocks     []ipamBlock
	affinities []blockAffinity
	handles    []ipamHandle
}

// TestAudit: a consistent state has no problem; each kind of damage is
// named.
func TestAudit(t *testing.T) {
	cidr := netip.MustParsePrefix("10.244.0.0/26")
	other := netip.MustParsePrefix("10.244.0.64/26")
	consistent := func() *ipamState {
		b := newBlock(cidr, "node1", false, time.Now())
		for _, h := range []string{"h1", "h2"} {
			if _, ok, err := b.Spec.allocate(h, secondary{"pod": h}, func(netip.Addr) bool { return false }); !ok || err != nil {
				t.Fatal(ok, err)
			}
		}
		return &ipamState{[]ipamBlock{b}, []blockAffinity{newAffinity("node1", cidr, stateConfirmed)},
			[]ipamHandle{newHandle("h1", cidr, 1), newHandle("h2", cidr, 1)}}
	}
	s := consistent()
	a := audit(s.blocks, s.affinities, s.handles)
	if len(a.Problems) != 0 || len(a.Allocations) != 2 || a.Allocations[1].Addr != netip.MustParseAddr("10.244.0.1") ||
		a.Allocations[1].Handle != "h2" || a.Allocations[1].Attrs["pod"] != "h2" {
		t.Fatalf("consistent state: %+v", a)
	}
	cases := []struct {
		damage func(s *ipamState)
		want   string
	}{
		{func(s *ipamState) { s.handles[0].Spec.Block[cidr.String()] = 2 }, "IPAMHandle h1: deleted false, counts map[10.244.0.0/26:2]"},
		{func(s *ipamState) { s.handles = s.handles[1:] }, "handle h1, which does not exist (leaked)"},
		{func(s *ipamState) { s.handles[1].Spec.Deleted = true }, "IPAMHandle h2: deleted true"},
		{func(s *ipamState) { s.blocks[0].Spec.Unallocated = append(s.blocks[0].Spec.Unallocated, 5) }, "ordinal 5 is in unallocated twice"},
		{func(s *ipamState) { s.blocks[0].Spec.Unallocated = append(s.blocks[0].Spec.Unallocated, 0) }, "ordinal 0 is both allocated and unallocated"},
		{func(s *ipamState) { s.blocks[0].Spec.Unallocated = s.blocks[0].Spec.Unallocated[1:] }, "ordinal 2 is neither allocated nor unallocated"},
		{func(s *ipamState) {
			s.blocks[0].Spec.Attributes = append(s.blocks[0].Spec.Attributes, allocationAttribute{HandleID: "h3"})
		}, "3 attributes, 2 in use"},
		{func(s *ipamState) {
			small := netip.MustParsePrefix("10.244.0.0/28")
			s.blocks = append(s.blocks, newBlock(small, "node1", false, time.Now()))
			s.affinities = append(s.affinities, newAffinity("node1", small, stateConfirmed))
		}, "IPAMBlocks 10.244.0.0/26 and 10.244.0.0/28 overlap"},
		{func(s *ipamState) { s.affinities = nil }, "no confirmed BlockAffinity node1-10-244-0-0-26"},
		{func(s *ipamState) { s.affinities = append(s.affinities, newAffinity("node1", other, statePending)) },
			`BlockAffinity node1-10-244-0-64-26: state "pending"`},
		{func(s *ipamState) { s.affinities = append(s.affinities, newAffinity("node2", other, stateConfirmed)) },
			"BlockAffinity node2-10-244-0-64-26: no IPAMBlock 10.244.0.64/26"},
	}
	for _, c := range cases {
		s := consistent()
		c.damage(s)
		a := audit(s.blocks, s.affinities, s.handles)
		if !slices.ContainsFunc(a.Problems, func(p string) bool { return strings.Contains(p, c.want) }) {
			t.Errorf("want a problem containing %q, got %q", c.want, a.Problems)
		}
	}
}

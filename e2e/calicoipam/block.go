package calicoipam

import (
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/calico-aio/calico-aio/store/kdd"
)

// Block bookkeeping as the recording shows it: allocations has one entry per
// address (an index into attributes, or null); unallocated is the FIFO of
// free ordinals (a released one goes to the end); sequenceNumber starts at
// a nanosecond clock and grows by one per allocation and per release;
// sequenceNumberForAllocation[ordinal] is its value before that allocation
// and stays after the release.

// newBlock is the empty block cidr, claimed for node at now.
func newBlock(cidr netip.Prefix, node string, strictAffinity bool, now time.Time) ipamBlock {
	n := 1 << (cidr.Addr().BitLen() - cidr.Bits())
	affinity := "host:" + node
	spec := blockSpec{
		Affinity:                    &affinity,
		AffinityClaimTime:           now.UTC().Format(time.RFC3339),
		Allocations:                 make([]*int, n),
		Attributes:                  []allocationAttribute{},
		CIDR:                        cidr.String(),
		SequenceNumber:              uint64(now.UnixNano()),
		SequenceNumberForAllocation: map[string]uint64{},
		StrictAffinity:              strictAffinity,
		Unallocated:                 make([]int, n),
	}
	for i := range spec.Unallocated {
		spec.Unallocated[i] = i
	}
	return ipamBlock{typeMeta: typeMeta{apiVersion, "IPAMBlock"}, Metadata: ipamMeta(kdd.BlockName(cidr), nil, "", ""), Spec: spec}
}

// forWrite is b as Calico sends it back: its name, its resourceVersion (the
// compare-and-swap) and no uid.
func (b ipamBlock) forWrite() ipamBlock {
	b.typeMeta = typeMeta{apiVersion, "IPAMBlock"}
	b.Metadata = ipamMeta(b.Metadata.Name, nil, b.Metadata.ResourceVersion, "")
	return b
}

// prefix is the block's CIDR.
func (s *blockSpec) prefix() (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s.CIDR)
	if err != nil {
		return p, fmt.Errorf("block cidr %q: %w", s.CIDR, err)
	}
	if want := 1 << (p.Addr().BitLen() - p.Bits()); len(s.Allocations) != want {
		return p, fmt.Errorf("block %s has %d allocations, want %d", s.CIDR, len(s.Allocations), want)
	}
	return p, nil
}

// ordinalAddr is the address of ordinal o of the block p.
func ordinalAddr(p netip.Prefix, o int) netip.Addr {
	base := new(big.Int).SetBytes(p.Masked().Addr().AsSlice())
	b := base.Add(base, big.NewInt(int64(o))).FillBytes(make([]byte, p.Addr().BitLen()/8))
	a, _ := netip.AddrFromSlice(b)
	return a
}

// allocate takes the first free ordinal whose address is not reserved for
// handleID with attributes sec. ok is false when the block has none.
func (s *blockSpec) allocate(handleID string, sec secondary, reserved func(netip.Addr) bool) (netip.Addr, bool, error) {
	p, err := s.prefix()
	if err != nil {
		return netip.Addr{}, false, err
	}
	for i, o := range s.Unallocated {
		if o < 0 || o >= len(s.Allocations) || s.Allocations[o] != nil {
			return netip.Addr{}, false, fmt.Errorf("block %s: unallocated ordinal %d is out of range or in use", s.CIDR, o)
		}
		addr := ordinalAddr(p, o)
		if reserved(addr) {
			continue
		}
		s.Unallocated = slices.Delete(s.Unallocated, i, i+1)
		idx := len(s.Attributes)
		s.Attributes = append(s.Attributes, allocationAttribute{HandleID: handleID, Secondary: sec})
		s.Allocations[o] = &idx
		s.SequenceNumberForAllocation[strconv.Itoa(o)] = s.SequenceNumber
		s.SequenceNumber++
		return addr, true, nil
	}
	return netip.Addr{}, false, nil
}

// release frees every ordinal of handleID (to the end of unallocated, in
// order), drops the attributes nothing refers to any more and renumbers
// the rest. It returns how many addresses it freed.
func (s *blockSpec) release(handleID string) int {
	freed := 0
	for o, idx := range s.Allocations {
		if idx != nil && *idx < len(s.Attributes) && s.Attributes[*idx].HandleID == handleID {
			s.Allocations[o] = nil
			s.Unallocated = append(s.Unallocated, o)
			freed++
		}
	}
	if freed == 0 {
		return 0
	}
	s.SequenceNumber++
	s.compactAttributes()
	return freed
}

// compactAttributes keeps the attributes still referred to, in order.
func (s *blockSpec) compactAttributes() {
	renumber := make(map[int]int, len(s.Attributes))
	var kept []allocationAttribute
	for _, idx := range s.Allocations {
		if idx == nil {
			continue
		}
		if _, ok := renumber[*idx]; !ok {
			renumber[*idx] = -1
		}
	}
	for i, a := range s.Attributes {
		if _, used := renumber[i]; used {
			renumber[i] = len(kept)
			kept = append(kept, a)
		}
	}
	for o, idx := range s.Allocations {
		if idx != nil {
			n := renumber[*idx]
			s.Allocations[o] = &n
		}
	}
	if kept == nil {
		kept = []allocationAttribute{}
	}
	s.Attributes = kept
}

// inUse is how many addresses of the block are allocated.
func (s *blockSpec) inUse() int {
	n := 0
	for _, idx := range s.Allocations {
		if idx != nil {
			n++
		}
	}
	return n
}

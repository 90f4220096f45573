package calicoipam

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/calico-aio/calico-aio/store/kdd"
)

// Allocation is one address a block holds.
type Allocation struct {
	Addr   netip.Addr
	Block  netip.Prefix
	Handle string
	Attrs  map[string]string // the attribute's secondary: namespace, node, pod, timestamp
}

// Audit is what the stored IPAM objects say, read as Calico reads them:
// every address held, and every inconsistency found.
type Audit struct {
	Allocations []Allocation // by address
	Problems    []string     // empty when blocks, affinities and handles agree
}

// Audit lists every IPAM block, block affinity and handle and checks them
// against each other, whoever wrote them: no address held twice (no two
// blocks overlap), each block whole (every ordinal free exactly once or
// allocated, every attribute in use), each affine block with its confirmed
// affinity and each confirmed affinity with its block, each handle
// counting exactly the addresses blocks hold for it, and no address held
// for a missing handle.
func (d *Double) Audit(ctx context.Context) (Audit, error) {
	var blocks struct{ Items []ipamBlock }
	var affinities struct{ Items []blockAffinity }
	var handles struct{ Items []ipamHandle }
	for path, out := range map[string]any{"ipamblocks": &blocks, "blockaffinities": &affinities, "ipamhandles": &handles} {
		if err := d.conn.list(ctx, crdAPI+"/"+path, nil, out); err != nil {
			return Audit{}, err
		}
	}
	return audit(blocks.Items, affinities.Items, handles.Items), nil
}

// audit checks the objects (pure).
func audit(blocks []ipamBlock, affinities []blockAffinity, handles []ipamHandle) Audit {
	var a Audit
	problem := func(format string, args ...any) { a.Problems = append(a.Problems, fmt.Sprintf(format, args...)) }
	affinityOf := map[string]blockAffinity{}
	for _, af := range affinities {
		affinityOf[af.Metadata.Name] = af
	}
	held := map[string]map[string]int{} // handle -> block -> addresses
	var cidrs []netip.Prefix
	for _, b := range blocks {
		cidr, err := b.Spec.prefix()
		if err != nil {
			problem("IPAMBlock %s: %v", b.Metadata.Name, err)
			continue
		}
		cidrs = append(cidrs, cidr)
		a.Problems = append(a.Problems, blockProblems(b)...)
		if b.Spec.Affinity != nil && strings.HasPrefix(*b.Spec.Affinity, "host:") {
			node := strings.TrimPrefix(*b.Spec.Affinity, "host:")
			af, ok := affinityOf[kdd.AffinityName(node, cidr)]
			if !ok || af.Spec.State != stateConfirmed || af.Spec.Deleted != "false" || af.Spec.Node != node {
				problem("IPAMBlock %s (affine to %s): no confirmed BlockAffinity %s", b.Metadata.Name, node, kdd.AffinityName(node, cidr))
			}
		}
		for o, idx := range b.Spec.Allocations {
			if idx == nil || *idx < 0 || *idx >= len(b.Spec.Attributes) {
				continue
			}
			attr := b.Spec.Attributes[*idx]
			a.Allocations = append(a.Allocations, Allocation{Addr: ordinalAddr(cidr, o), Block: cidr, Handle: attr.HandleID, Attrs: attr.Secondary})
			if held[attr.HandleID] == nil {
				held[attr.HandleID] = map[string]int{}
			}
			held[attr.HandleID][cidr.String()]++
		}
	}
	a.Problems = append(a.Problems, overlaps(cidrs)...)
	a.Problems = append(a.Problems, affinityProblems(affinities, cidrs)...)
	a.Problems = append(a.Problems, handleProblems(handles, held)...)
	slices.SortFunc(a.Allocations, func(x, y Allocation) int { return x.Addr.Compare(y.Addr) })
	return a
}

// blockProblems checks one block is whole.
func blockProblems(b ipamBlock) []string {
	var out []string
	s := b.Spec
	free := map[int]bool{}
	for _, o := range s.Unallocated {
		switch {
		case o < 0 || o >= len(s.Allocations):
			out = append(out, fmt.Sprintf("IPAMBlock %s: unallocated ordinal %d out of range", b.Metadata.Name, o))
		case free[o]:
			out = append(out, fmt.Sprintf("IPAMBlock %s: ordinal %d is in unallocated twice", b.Metadata.Name, o))
		case s.Allocations[o] != nil:
			out = append(out, fmt.Sprintf("IPAMBlock %s: ordinal %d is both allocated and unallocated", b.Metadata.Name, o))
		}
		free[o] = true
	}
	used := map[int]bool{}
	for o, idx := range s.Allocations {
		switch {
		case idx == nil && !free[o]:
			out = append(out, fmt.Sprintf("IPAMBlock %s: ordinal %d is neither allocated nor unallocated", b.Metadata.Name, o))
		case idx != nil && (*idx < 0 || *idx >= len(s.Attributes)):
			out = append(out, fmt.Sprintf("IPAMBlock %s: ordinal %d refers to attribute %d of %d", b.Metadata.Name, o, *idx, len(s.Attributes)))
		case idx != nil:
			used[*idx] = true
		}
	}
	if len(used) != len(s.Attributes) {
		out = append(out, fmt.Sprintf("IPAMBlock %s: %d attributes, %d in use", b.Metadata.Name, len(s.Attributes), len(used)))
	}
	return out
}

// overlaps reports blocks that share addresses.
func overlaps(cidrs []netip.Prefix) []string {
	var out []string
	for i, x := range cidrs {
		for _, y := range cidrs[i+1:] {
			if x.Overlaps(y) {
				out = append(out, fmt.Sprintf("IPAMBlocks %s and %s overlap", x, y))
			}
		}
	}
	return out
}

// affinityProblems reports confirmed affinities without their block and
// affinities left pending.
func affinityProblems(affinities []blockAffinity, cidrs []netip.Prefix) []string {
	var out []string
	for _, af := range affinities {
		cidr, err := parseCIDR(af.Spec.CIDR)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("BlockAffinity %s: %v", af.Metadata.Name, err))
		case af.Spec.State != stateConfirmed:
			out = append(out, fmt.Sprintf("BlockAffinity %s: state %q", af.Metadata.Name, af.Spec.State))
		case !slices.Contains(cidrs, cidr):
			out = append(out, fmt.Sprintf("BlockAffinity %s: no IPAMBlock %s", af.Metadata.Name, cidr))
		}
	}
	return out
}

// handleProblems compares each handle with what the blocks hold for it (a
// handle marked deleted or holding nothing is a leftover).
func handleProblems(handles []ipamHandle, held map[string]map[string]int) []string {
	var out []string
	seen := map[string]bool{}
	for _, h := range handles {
		id := h.Spec.HandleID
		seen[id] = true
		if h.Spec.Deleted || len(h.Spec.Block) == 0 || !maps.Equal(h.Spec.Block, held[id]) {
			out = append(out, fmt.Sprintf("IPAMHandle %s: deleted %v, counts %v; the blocks hold %v", id, h.Spec.Deleted, h.Spec.Block, held[id]))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(held)) {
		if !seen[id] {
			out = append(out, fmt.Sprintf("addresses held for handle %s, which does not exist (leaked): %v", id, held[id]))
		}
	}
	return out
}

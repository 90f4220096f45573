package calicoipam

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// errClaimLost says another claimer got the block first; try another.
var errClaimLost = errors.New("the block was claimed by someone else")

// claim claims a free block for node, as recorded: LIST blocks, POST the
// affinity pending, GET the block (404), PUT the affinity pending, GET
// IPAMConfig, POST the block, PUT the affinity confirmed. skip are blocks
// not to try (the node's own affinities, lost claims). It returns the block
// as created.
func (d *Double) claim(ctx context.Context, node string, e env, skip map[netip.Prefix]bool) (ipamBlock, error) {
	for range maxAttempts {
		var list struct{ Items []ipamBlock }
		if err := d.conn.list(ctx, crdAPI+"/ipamblocks", nil, &list); err != nil {
			return ipamBlock{}, err
		}
		taken := map[netip.Prefix]bool{}
		for _, b := range list.Items {
			if p, err := parseCIDR(b.Spec.CIDR); err == nil {
				taken[p] = true
			}
		}
		cidr, ok := d.freeBlock(e, func(p netip.Prefix) bool { return taken[p] || skip[p] })
		if !ok {
			return ipamBlock{}, errors.New("no free block left in the node's pools")
		}
		block, err := d.claimBlock(ctx, node, cidr)
		if errors.Is(err, errClaimLost) {
			d.conflicts.Add(1)
			skip[cidr] = true
			continue
		}
		return block, err
	}
	return ipamBlock{}, fmt.Errorf("node %s: every claim lost after %d attempts", node, maxAttempts)
}

// claimBlock claims the block cidr for node; errClaimLost when another
// claimer has it.
func (d *Double) claimBlock(ctx context.Context, node string, cidr netip.Prefix) (ipamBlock, error) {
	var aff blockAffinity
	err := d.conn.create(ctx, crdAPI+"/blockaffinities", newAffinity(node, cidr, statePending), &aff)
	if errors.Is(err, ErrAlreadyExists) {
		return ipamBlock{}, errClaimLost
	}
	if err != nil {
		return ipamBlock{}, err
	}
	var existing ipamBlock
	err = d.conn.get(ctx, blockPath(cidr), &existing)
	if err == nil {
		return ipamBlock{}, d.dropAffinity(ctx, aff)
	}
	if !errors.Is(err, ErrNotFound) {
		return ipamBlock{}, err
	}
	if err := d.putAffinity(ctx, &aff, statePending); err != nil {
		return ipamBlock{}, err
	}
	cfg, err := d.ipamConfig(ctx)
	if err != nil {
		return ipamBlock{}, err
	}
	var block ipamBlock
	err = d.conn.create(ctx, crdAPI+"/ipamblocks", newBlock(cidr, node, cfg.StrictAffinity, time.Now()), &block)
	if errors.Is(err, ErrAlreadyExists) {
		return ipamBlock{}, d.dropAffinity(ctx, aff)
	}
	if err != nil {
		return ipamBlock{}, err
	}
	return block, d.putAffinity(ctx, &aff, stateConfirmed)
}

// putAffinity writes aff in state (compare-and-swap) and keeps the answer.
func (d *Double) putAffinity(ctx context.Context, aff *blockAffinity, state string) error {
	cidr, err := parseCIDR(aff.Spec.CIDR)
	if err != nil {
		return err
	}
	out := newAffinity(aff.Spec.Node, cidr, state)
	out.Metadata.ResourceVersion = aff.Metadata.ResourceVersion
	return d.conn.update(ctx, affinityPath(aff.Spec.Node, cidr), out, aff)
}

// dropAffinity deletes a claim that lost (on the condition of its uid) and
// reports errClaimLost.
func (d *Double) dropAffinity(ctx context.Context, aff blockAffinity) error {
	cidr, err := parseCIDR(aff.Spec.CIDR)
	if err != nil {
		return err
	}
	if err := d.conn.deleteUID(ctx, affinityPath(aff.Spec.Node, cidr), aff.Metadata.UID); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return errClaimLost
}

// freeBlock is the first block of the pools, from the start block when it
// lies in a pool, that taken does not rule out.
func (d *Double) freeBlock(e env, taken func(netip.Prefix) bool) (netip.Prefix, bool) {
	for _, p := range e.pools {
		n := uint32(1) << (p.blockBits - p.cidr.Bits())
		first := uint32(0)
		if d.start.IsValid() && d.start.Bits() == p.blockBits && p.cidr.Contains(d.start.Addr()) {
			first = (v4(d.start.Addr()) - v4(p.cidr.Addr())) >> (32 - p.blockBits)
		}
		for i := range n {
			idx := (first + i) % n
			a := v4(p.cidr.Addr()) + idx<<(32-p.blockBits)
			cidr := netip.PrefixFrom(netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, a))), p.blockBits)
			if !taken(cidr) {
				return cidr, true
			}
		}
	}
	return netip.Prefix{}, false
}

func v4(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

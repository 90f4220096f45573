package ipam

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/calico-aio/calico-aio/store"
)

// ReleaseNodeAffinities gives up a node's blocks. Empty blocks are deleted
// with their affinity. With onlyEmpty false, blocks still in use lose their
// affinity (the addresses stay allocated) and the affinity is deleted.
// It returns how many affinities were released.
func (a *Allocator) ReleaseNodeAffinities(ctx context.Context, node string, onlyEmpty bool) (int, error) {
	affs, err := a.list(ctx, store.ListOptions{Kind: store.KindBlockAffinity, Node: node})
	if err != nil {
		return 0, err
	}
	released := 0
	for _, o := range affs {
		ok, err := a.releaseAffinity(ctx, node, o, onlyEmpty)
		if err != nil {
			return released, err
		}
		if ok {
			released++
		}
	}
	return released, nil
}

// releaseAffinity writes the affine block (deleted when empty, unaffined
// when in use) before deleting the affinity, Calico's order.
func (a *Allocator) releaseAffinity(ctx context.Context, node string, aff store.Object, onlyEmpty bool) (bool, error) {
	cidr, err := netip.ParsePrefix(aff.Key.Name)
	if err != nil {
		return false, fmt.Errorf("affinity %s: %w", aff.Key, err)
	}
	for attempt := 0; attempt < maxRetries; attempt++ {
		blocks, err := a.readBlocks(ctx, []string{cidr.String()})
		if err != nil {
			return false, err
		}
		w := &writeOps{}
		if bk := blocks[cidr.String()]; bk != nil && bk.block.AffineTo(node) {
			switch {
			case bk.block.InUse() == 0:
				if err := w.deleteBlock(bk.block.CIDR, bk); err != nil {
					return false, err
				}
			case onlyEmpty:
				return false, nil
			default:
				bk.block.Affinity = nil
				bk.block.AffinityClaimTime = ""
				if err := w.putBlock(bk.block.CIDR, bk); err != nil {
					return false, err
				}
			}
		}
		w.writes = append(w.writes, store.Write{Op: store.OpDelete, Key: aff.Key, Revision: aff.Revision})
		ok, err := a.commit(ctx, w)
		if err != nil {
			return false, err
		}
		if ok {
			return true, nil
		}
		// The affinity or block changed: re-read the affinity's revision.
		o, err := a.get(ctx, aff.Key)
		if err != nil {
			return false, nil // gone: someone else released it
		}
		aff = o
		backoff(attempt)
	}
	return false, fmt.Errorf("releasing affinity %s: gave up after %d conflicting attempts", aff.Key, maxRetries)
}

package ipam

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"

	"github.com/calico-aio/calico-aio/store"
)

// ReleaseByHandle frees every address a handle holds and deletes the
// handle, in one transaction where the backend has them (otherwise the
// blocks, then the handle: changeHandle). A missing handle is not an
// error (nothing is held); it returns the addresses freed.
func (a *Allocator) ReleaseByHandle(ctx context.Context, handleID string) ([]netip.Addr, error) {
	return a.ReleaseByHandleThen(ctx, handleID, nil)
}

// ReleaseByHandleThen is ReleaseByHandle calling blocksDone (when not nil)
// once the handle's blocks are written, before the handle's own writes on
// a datastore without transactions: the CNI plugin releases the node's
// IPAM lock there, since the lock is for the blocks, and the handle is
// the container's own. It is not called when the release fails first.
func (a *Allocator) ReleaseByHandleThen(ctx context.Context, handleID string, blocksDone func()) ([]netip.Addr, error) {
	for attempt := 0; attempt < maxRetries; attempt++ {
		h, hrev, err := a.readHandle(ctx, handleID)
		if err != nil || h == nil {
			return nil, err
		}
		cidrs := make([]string, 0, len(h.Block))
		for c := range h.Block {
			cidrs = append(cidrs, c)
		}
		sort.Strings(cidrs)
		blocks, err := a.readBlocks(ctx, cidrs)
		if err != nil {
			return nil, err
		}
		w := &writeOps{}
		var freed []netip.Addr
		for _, c := range cidrs {
			bk, ok := blocks[c]
			if !ok {
				continue
			}
			got, err := releaseFromBlock(bk, w, func(ord int) bool { return bk.block.handleOf(ord) == handleID })
			if err != nil {
				return nil, err
			}
			freed = append(freed, got...)
		}
		if a.c.Atomic() {
			w.putHandle(handleID, &Handle{Block: map[string]int{}}, hrev)
		}
		ok, err := a.commit(ctx, w)
		if err != nil {
			return nil, err
		}
		if ok && blocksDone != nil {
			blocksDone()
		}
		if ok && !a.c.Atomic() {
			// Calico's order without transactions: the blocks, then the
			// handle's counts taken off (deleted when none are left).
			err = a.changeHandleFrom(ctx, handleID, negated(h.Block), h, hrev)
		}
		if ok {
			return freed, err
		}
		backoff(attempt)
	}
	return nil, fmt.Errorf("release of handle %s: gave up after %d conflicting attempts", handleID, maxRetries)
}

// releaseFromBlock frees matching ordinals and adds the block's write: a
// put, or a delete when an unaffine block is left empty.
func releaseFromBlock(bk *blockKV, w *writeOps, match func(int) bool) ([]netip.Addr, error) {
	cidr, err := bk.block.Prefix()
	if err != nil {
		return nil, err
	}
	ords := bk.block.release(match)
	if len(ords) == 0 {
		return nil, nil
	}
	out := make([]netip.Addr, len(ords))
	for i, o := range ords {
		out[i] = ordinalAddr(cidr, o)
	}
	if bk.block.Affinity == nil && bk.block.InUse() == 0 {
		return out, w.deleteBlock(bk.block.CIDR, bk)
	}
	return out, w.putBlock(bk.block.CIDR, bk)
}

// ReleaseOptions names one address to free. Handle and SequenceNumber, when
// set, must match the allocation: a stale release of an address that was
// freed and handed out again in between frees nothing.
type ReleaseOptions struct {
	Addr           netip.Addr
	Handle         string
	SequenceNumber *uint64
}

// ReleaseIPs frees addresses and fixes their handles, in one transaction.
// It returns the addresses that were not allocated (or did not match).
func (a *Allocator) ReleaseIPs(ctx context.Context, opts []ReleaseOptions) ([]netip.Addr, error) {
	for attempt := 0; attempt < maxRetries; attempt++ {
		unallocated, ok, err := a.releaseIPsOnce(ctx, opts)
		if err != nil || ok {
			return unallocated, err
		}
		backoff(attempt)
	}
	return nil, fmt.Errorf("release of %d address(es): gave up after %d conflicting attempts", len(opts), maxRetries)
}

func (a *Allocator) releaseIPsOnce(ctx context.Context, opts []ReleaseOptions) ([]netip.Addr, bool, error) {
	snap, err := a.readSnapshot(ctx, "", "")
	if err != nil {
		return nil, false, err
	}
	cidrOf := map[netip.Addr]string{}
	var cidrs []string
	for _, o := range opts {
		c, err := a.blockContaining(ctx, snap.pools, o.Addr)
		if err != nil {
			return nil, false, err
		}
		if c == "" {
			continue
		}
		cidrOf[o.Addr] = c
		cidrs = append(cidrs, c)
	}
	blocks, err := a.readBlocks(ctx, cidrs)
	if err != nil {
		return nil, false, err
	}
	var unallocated []netip.Addr
	handleDelta := map[string]map[string]int{}
	toFree := map[string]map[int]bool{}
	for _, o := range opts {
		bk := blocks[cidrOf[o.Addr]]
		if bk == nil {
			unallocated = append(unallocated, o.Addr)
			continue
		}
		p, _ := bk.block.Prefix()
		ord := addrOrdinal(p, o.Addr)
		h := bk.block.handleOf(ord)
		seq, hasSeq := bk.block.SequenceNumberForAllocation[fmt.Sprint(ord)]
		if bk.block.Allocations[ord] == nil || (o.Handle != "" && o.Handle != h) ||
			(o.SequenceNumber != nil && (!hasSeq || seq != *o.SequenceNumber)) {
			unallocated = append(unallocated, o.Addr)
			continue
		}
		if toFree[bk.block.CIDR] == nil {
			toFree[bk.block.CIDR] = map[int]bool{}
		}
		toFree[bk.block.CIDR][ord] = true
		if h != "" {
			if handleDelta[h] == nil {
				handleDelta[h] = map[string]int{}
			}
			handleDelta[h][bk.block.CIDR]--
		}
	}
	w := &writeOps{}
	for c, ords := range toFree {
		bk := blocks[c]
		if _, err := releaseFromBlock(bk, w, func(o int) bool { return ords[o] }); err != nil {
			return nil, false, err
		}
	}
	if !a.c.Atomic() {
		ok, err := a.commit(ctx, w)
		if ok {
			err = a.changeHandles(ctx, handleDelta)
		}
		return unallocated, ok, err
	}
	if err := a.adjustHandles(ctx, w, handleDelta); err != nil {
		return nil, false, err
	}
	ok, err := a.commit(ctx, w)
	return unallocated, ok, err
}

// changeHandles applies each handle's delta after the blocks are written,
// Calico's order on a backend without transactions.
func (a *Allocator) changeHandles(ctx context.Context, delta map[string]map[string]int) error {
	for _, id := range slices.Sorted(maps.Keys(delta)) {
		if err := a.changeHandle(ctx, id, delta[id]); err != nil {
			return err
		}
	}
	return nil
}

func negated(counts map[string]int) map[string]int {
	out := make(map[string]int, len(counts))
	for c, n := range counts {
		out[c] = -n
	}
	return out
}

// adjustHandles reads the handles in one transaction and adds their
// updated values (or deletes) to w.
func (a *Allocator) adjustHandles(ctx context.Context, w *writeOps, delta map[string]map[string]int) error {
	if len(delta) == 0 {
		return nil
	}
	ids := make([]string, 0, len(delta))
	reads := make([]store.Read, 0, len(delta))
	for id := range delta {
		ids = append(ids, id)
		reads = append(reads, store.Read{Key: handleKey(id)})
	}
	resp, err := a.readMany(ctx, reads)
	if err != nil {
		return err
	}
	for i, id := range ids {
		kvs := resp[i]
		if len(kvs) == 0 {
			continue // the handle is already gone: nothing to fix
		}
		h, err := parseHandle(id, kvs[0].Value)
		if err != nil {
			return err
		}
		for c, n := range delta[id] {
			h.add(c, n)
		}
		w.putHandle(id, h, kvs[0].Revision)
	}
	return nil
}

// blockContaining finds the CIDR of the block holding addr: from its pool's
// block size, or (pool gone) by looking at the existing blocks.
func (a *Allocator) blockContaining(ctx context.Context, pools []pool, addr netip.Addr) (string, error) {
	if p, ok := poolFor(pools, addr); ok {
		return p.blockOf(addr).String(), nil
	}
	keys, err := a.blockKeys(ctx, familyOf(addr))
	if err != nil {
		return "", err
	}
	for k := range keys {
		if k.Contains(addr) {
			return k.String(), nil
		}
	}
	return "", nil
}

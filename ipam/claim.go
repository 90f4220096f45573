package ipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/big"
	"net/netip"

	"github.com/calico-aio/calico-aio/store"
)

// maxClaimScan bounds how many candidate blocks of a pool one claim looks at.
const maxClaimScan = 1 << 20

// claimFree claims the first free block of the pools for node, starting
// each pool's scan at a node-dependent offset so nodes claiming at once
// rarely pick the same block. It returns nil when every block is taken.
func (a *Allocator) claimFree(ctx context.Context, node string, pools []pool) (*blockKV, error) {
	if len(pools) == 0 {
		return nil, nil
	}
	fam := familyOf(pools[0].prefix.Addr())
	taken, err := a.blockKeys(ctx, fam)
	if err != nil {
		return nil, err
	}
	for _, p := range pools {
		n := new(big.Int).Lsh(big.NewInt(1), uint(p.blockBits-p.prefix.Bits()))
		start := new(big.Int).Mod(new(big.Int).SetUint64(nodeHash(node)), n)
		idx := new(big.Int).Set(start)
		for i := 0; i < maxClaimScan; i++ {
			cidr := blockAt(p, idx)
			if _, used := taken[cidr]; !used {
				bk, err := a.claim(ctx, node, cidr)
				if err != nil {
					return nil, err
				}
				if bk != nil {
					return bk, nil
				}
				taken[cidr] = struct{}{}
			}
			idx.Add(idx, big.NewInt(1))
			idx.Mod(idx, n)
			if idx.Cmp(start) == 0 {
				break
			}
		}
	}
	return nil, nil
}

func nodeHash(node string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(node))
	return h.Sum64()
}

// blockAt is the idx-th block of a pool.
func blockAt(p pool, idx *big.Int) netip.Prefix {
	base := new(big.Int).SetBytes(p.prefix.Addr().AsSlice())
	off := new(big.Int).Lsh(idx, uint(p.prefix.Addr().BitLen()-p.blockBits))
	base.Add(base, off)
	addr, _ := netip.AddrFromSlice(base.FillBytes(make([]byte, p.prefix.Addr().BitLen()/8)))
	return netip.PrefixFrom(addr, p.blockBits)
}

// blockKeys lists the CIDRs of every existing block of a family.
func (a *Allocator) blockKeys(ctx context.Context, fam string) (map[netip.Prefix]struct{}, error) {
	objs, err := a.list(ctx, blocksOf(fam))
	if err != nil {
		return nil, err
	}
	out := map[netip.Prefix]struct{}{}
	for _, o := range objs {
		if p, err := netip.ParsePrefix(o.Key.Name); err == nil {
			out[p] = struct{}{}
		}
	}
	return out, nil
}

func affinityJSON(state string) []byte {
	b, _ := json.Marshal(affinityValue{State: state})
	return b
}

// lostRace says a compare-and-swap on an object lost to another writer.
func lostRace(err error) bool {
	return errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrAlreadyExists)
}

// claim takes block cidr for node in Calico's order: the affinity written
// "pending", the block read, and, the block being absent, the affinity
// written "pending" again, the block created, the affinity "confirmed".
// It returns nil (and removes its affinity) when another node holds the
// block. A step that loses a compare-and-swap starts the claim again.
func (a *Allocator) claim(ctx context.Context, node string, cidr netip.Prefix) (*blockKV, error) {
	for attempt := 0; attempt < maxRetries; attempt++ {
		bk, err := a.claimOnce(ctx, node, cidr)
		if !lostRace(err) {
			return bk, err
		}
		a.conflicts.Add(1)
		backoff(attempt)
	}
	return nil, fmt.Errorf("claiming block %s: gave up after %d conflicting attempts", cidr, maxRetries)
}

func (a *Allocator) claimOnce(ctx context.Context, node string, cidr netip.Prefix) (*blockKV, error) {
	akey := affinityKey(node, cidr)
	arev, err := a.pendingAffinity(ctx, akey)
	if err != nil {
		return nil, err
	}
	existing, err := a.readBlocks(ctx, []string{cidr.String()})
	if err != nil {
		return nil, err
	}
	if bk := existing[cidr.String()]; bk != nil {
		return a.claimExisting(ctx, node, akey, arev, bk)
	}
	// Calico writes the affinity "pending" once more here: its step from
	// an affinity to its block serves every affinity of the node, also a
	// confirmed (or pendingDeletion) one that outlived its block, which must
	// be pending again before the block is re-created. For the pending
	// affinity just written it is redundant for safety (the block's create
	// decides who owns the block, and the confirm below is a
	// compare-and-swap at the revision this write returns, so a releaser's
	// change in between is caught either way), but it is kept so that the
	// requests, and how they interleave with real calico-ipam's, are
	// Calico's (e2e TestCNIKDDCalls).
	a.roundTrips.Add(1)
	if arev, err = a.c.Update(ctx, akey, affinityJSON(AffinityPending), arev); err != nil {
		return nil, fmt.Errorf("marking affinity %s pending: %w", akey, err)
	}
	b := newBlock(cidr, node, a.timestamp())
	val, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	a.roundTrips.Add(1)
	rev, err := a.c.Create(ctx, blockKey(cidr), val)
	if errors.Is(err, store.ErrAlreadyExists) {
		existing, err := a.readBlocks(ctx, []string{cidr.String()})
		if err != nil {
			return nil, err
		}
		if bk := existing[cidr.String()]; bk != nil {
			return a.claimExisting(ctx, node, akey, arev, bk)
		}
		return nil, fmt.Errorf("block %s deleted while claimed: %w", cidr, store.ErrConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("creating block %s: %w", cidr, err)
	}
	if err := a.confirm(ctx, akey, arev); err != nil {
		return nil, err
	}
	return &blockKV{block: b, rev: rev}, nil
}

// pendingAffinity writes the node's affinity for a block "pending": a
// create, or, when it exists, an update of one not yet confirmed (a
// confirmed one is left as it is). It returns the affinity's revision.
func (a *Allocator) pendingAffinity(ctx context.Context, akey store.Key) (store.Revision, error) {
	a.roundTrips.Add(1)
	rev, err := a.c.Create(ctx, akey, affinityJSON(AffinityPending))
	if !errors.Is(err, store.ErrAlreadyExists) {
		if err != nil {
			return "", fmt.Errorf("claiming block %s: %w", akey.Name, err)
		}
		return rev, nil
	}
	o, err := a.get(ctx, akey)
	if err != nil {
		return "", err
	}
	var v affinityValue
	if err := json.Unmarshal(o.Value, &v); err != nil {
		return "", fmt.Errorf("affinity %s: %w", akey, err)
	}
	if v.State == AffinityConfirmed {
		return o.Revision, nil
	}
	a.roundTrips.Add(1)
	return a.c.Update(ctx, akey, affinityJSON(AffinityPending), o.Revision)
}

// claimExisting finishes a claim whose block exists: the node's own (an
// earlier claim of this node created it) has its affinity confirmed;
// another node's costs this node its affinity, and nil is returned.
func (a *Allocator) claimExisting(ctx context.Context, node string, akey store.Key, arev store.Revision, bk *blockKV) (*blockKV, error) {
	if bk.block.AffineTo(node) {
		return bk, a.confirm(ctx, akey, arev)
	}
	a.roundTrips.Add(1)
	if err := a.c.Delete(ctx, akey, arev); err != nil && !lostRace(err) {
		return nil, fmt.Errorf("dropping affinity for %s: %w", akey.Name, err)
	}
	return nil, nil
}

// confirm marks the affinity confirmed: a compare-and-swap on the pending
// affinity this claim wrote (revision arev; "" when an earlier claim wrote
// it, which is read first), re-created if it vanished meanwhile.
func (a *Allocator) confirm(ctx context.Context, akey store.Key, arev store.Revision) error {
	val := affinityJSON(AffinityConfirmed)
	for attempt := 0; attempt < maxRetries; attempt++ {
		var err error
		a.roundTrips.Add(1)
		switch {
		case arev == "":
			var o store.Object
			if o, err = a.c.Get(ctx, akey); err == nil {
				arev = o.Revision
				continue
			}
			if errors.Is(err, store.ErrNotFound) {
				a.roundTrips.Add(1)
				_, err = a.c.Create(ctx, akey, val)
			}
		default:
			_, err = a.c.Update(ctx, akey, val, arev)
			arev = ""
		}
		if err == nil {
			return nil
		}
		if !lostRace(err) {
			return fmt.Errorf("confirming affinity %s: %w", akey, err)
		}
	}
	return fmt.Errorf("confirming affinity %s: gave up after %d conflicting attempts", akey, maxRetries)
}

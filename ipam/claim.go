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

// claim takes block cidr for node in Calico's two steps: affinity
// "pending", create the block, affinity "confirmed". It returns nil (and
// removes its pending affinity) when another node created the block first.
func (a *Allocator) claim(ctx context.Context, node string, cidr netip.Prefix) (*blockKV, error) {
	akey := affinityKey(node, cidr)
	a.roundTrips.Add(1)
	arev, err := a.c.Create(ctx, akey, affinityJSON(AffinityPending))
	if err != nil && !errors.Is(err, store.ErrAlreadyExists) {
		return nil, fmt.Errorf("claiming block %s: %w", cidr, err)
	}
	b := newBlock(cidr, node, a.timestamp())
	val, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	a.roundTrips.Add(1)
	rev, err := a.c.Create(ctx, blockKey(cidr), val)
	if errors.Is(err, store.ErrAlreadyExists) {
		existing, gerr := a.readBlocks(ctx, []string{cidr.String()})
		if gerr != nil {
			return nil, gerr
		}
		bk := existing[cidr.String()]
		if bk != nil && bk.block.AffineTo(node) {
			// Our own earlier claim got this far; finish it.
			return bk, a.confirm(ctx, akey, arev)
		}
		a.roundTrips.Add(1)
		if derr := a.c.Delete(ctx, akey, ""); derr != nil && !errors.Is(derr, store.ErrNotFound) {
			return nil, fmt.Errorf("dropping pending affinity for %s: %w", cidr, derr)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("creating block %s: %w", cidr, err)
	}
	if err := a.confirm(ctx, akey, arev); err != nil {
		return nil, err
	}
	return &blockKV{block: b, rev: rev}, nil
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
		if !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrAlreadyExists) {
			return fmt.Errorf("confirming affinity %s: %w", akey, err)
		}
	}
	return fmt.Errorf("confirming affinity %s: gave up after %d conflicting attempts", akey, maxRetries)
}

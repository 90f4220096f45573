package ipam

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/calico-aio/calico-aio/store"
)

// ReleaseNodeAffinities gives up a node's blocks. Empty blocks are deleted
// with their affinity. With onlyEmpty false, blocks still in use lose their
// affinity (the addresses stay allocated) and the affinity is deleted.
// It returns how many affinities were released.
func (a *Allocator) ReleaseNodeAffinities(ctx context.Context, node string, onlyEmpty bool) (int, error) {
	affs, err := a.list(ctx, store.HostAffinityPrefix(node, ""))
	if err != nil {
		return 0, err
	}
	released := 0
	for _, kv := range affs {
		ok, err := a.releaseAffinity(ctx, node, kv, onlyEmpty)
		if err != nil {
			return released, err
		}
		if ok {
			released++
		}
	}
	return released, nil
}

func (a *Allocator) releaseAffinity(ctx context.Context, node string, akv store.KV, onlyEmpty bool) (bool, error) {
	seg := akv.Key[len(akv.Key)-len(lastSegment(akv.Key)):]
	cidr, err := store.ParseCIDRSegment(seg)
	if err != nil {
		return false, err
	}
	for attempt := 0; attempt < maxRetries; attempt++ {
		blocks, err := a.readBlocks(ctx, []string{cidr.String()})
		if err != nil {
			return false, err
		}
		w := &writeOps{
			cmps: []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(akv.Key), "=", akv.Revision)},
			ops:  []clientv3.Op{clientv3.OpDelete(akv.Key)},
		}
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
		ok, err := a.commit(ctx, w)
		if err != nil {
			return false, err
		}
		if ok {
			return true, nil
		}
		// The affinity or block changed: re-read the affinity's revision.
		kv, err := a.get(ctx, akv.Key)
		if err != nil {
			return false, nil // gone: someone else released it
		}
		akv = kv
		backoff(attempt)
	}
	return false, fmt.Errorf("releasing affinity %s: gave up after %d conflicting attempts", akv.Key, maxRetries)
}

func lastSegment(key string) string {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == '/' {
			return key[i+1:]
		}
	}
	return key
}

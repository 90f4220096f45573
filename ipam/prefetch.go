package ipam

import "context"

// A caller that knows it is about to assign (the CNI plugin, whose first
// reads are round trips of their own) starts the assignment's first read
// early, so that it overlaps the caller's other reads. On Kubernetes the
// caller asks for a recent read (store.RecentReads: from the apiserver's
// watch cache), which may be a little older than the moment it was made:
// the assignment's writes are compare-and-swap, and one that lost to a
// write made since is retried on a fresh read, as always; and what an
// assignment would decide from absence or from the handle (claim or borrow
// a block, create the IPAM config, finish a handle's delete, reuse the
// handle's addresses, refuse for want of a pool) is never decided from it:
// the assignment reads the latest state first (recentOnly in assign.go).
// On etcd every read is the latest anyway.

// prefetch is a snapshot read under way.
type prefetch struct {
	node, handle string
	done         chan struct{}
	snap         *snapshot
	err          error
}

// Prefetch starts reading what an AutoAssign of handleID on node reads
// first, as ctx asks (store.RecentReads or at the latest); the
// allocator's next AutoAssign with that node and handle uses it. An
// allocator is used by one goroutine (the one calling Prefetch and
// AutoAssign).
func (a *Allocator) Prefetch(ctx context.Context, node, handleID string) {
	p := &prefetch{node: node, handle: handleID, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.snap, p.err = a.readSnapshot(ctx, node, handleID)
	}()
	a.pre = p
}

// firstSnapshot is the prefetched snapshot for node and handleID when
// there is one that was read without error, else a fresh read.
func (a *Allocator) firstSnapshot(ctx context.Context, node, handleID string) (*snapshot, error) {
	p := a.pre
	a.pre = nil
	if p != nil && p.node == node && p.handle == handleID {
		<-p.done
		if p.err == nil {
			// Under the caller's lock now: blocks this process wrote
			// since the read began (an earlier call of a burst) are
			// taken as written.
			if err := a.catchUpWritten(ctx, p.snap); err != nil {
				return nil, err
			}
			return p.snap, nil
		}
	}
	return a.readSnapshot(ctx, node, handleID)
}

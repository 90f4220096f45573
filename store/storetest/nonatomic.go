package storetest

import (
	"context"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/model"
)

// NonAtomic is b with the Commit of a datastore without multi-object
// transactions (the Kubernetes API): writes applied one at a time in the
// order given, stopping at the first that fails, nothing undone. Tests run
// IPAM's per-object protocol with it on a real etcd.
type NonAtomic struct {
	store.Backend
	// BeforeWrite, when set, runs before each write of a Commit (i is its
	// index): a test changes the datastore there to make the write lose.
	BeforeWrite func(ctx context.Context, i int, w store.Write)
}

// Atomic is false: Commit may apply a prefix of its writes.
func (n *NonAtomic) Atomic() bool { return false }

// Commit applies the writes in order and stops at the first failure.
func (n *NonAtomic) Commit(ctx context.Context, writes []store.Write) ([]store.Revision, error) {
	return model.CommitInTurn(ctx, n.Backend, writes, func(i int, w store.Write) {
		if n.BeforeWrite != nil {
			n.BeforeWrite(ctx, i, w)
		}
	})
}

package storetest

import (
	"context"
	"errors"
	"fmt"

	"github.com/calico-aio/calico-aio/store"
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
	var revs []store.Revision
	for i, w := range writes {
		if n.BeforeWrite != nil {
			n.BeforeWrite(ctx, i, w)
		}
		rev, err := n.apply(ctx, w)
		if err != nil {
			return revs, err
		}
		revs = append(revs, rev)
	}
	return revs, nil
}

func (n *NonAtomic) apply(ctx context.Context, w store.Write) (rev store.Revision, err error) {
	switch {
	case w.Op == store.OpDelete:
		err = n.Backend.Delete(ctx, w.Key, w.Revision)
	case w.Op == store.OpPut && w.Revision == "":
		rev, err = n.Backend.Create(ctx, w.Key, w.Value)
	case w.Op == store.OpPut:
		rev, err = n.Backend.Update(ctx, w.Key, w.Value, w.Revision)
	default:
		return "", fmt.Errorf("%s: write operation %d is neither put nor delete", w.Key, w.Op)
	}
	// A lost precondition is a conflict, whatever form it took.
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrAlreadyExists) {
		return "", &store.ConflictError{Key: w.Key, Expected: w.Revision}
	}
	return rev, err
}

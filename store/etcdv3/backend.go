package etcdv3

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/calico-aio/calico-aio/store/model"
)

// Get reads one object.
func (c *Backend) Get(ctx context.Context, k model.Key) (model.Object, error) {
	ekey, err := EtcdKey(k)
	if err != nil {
		return model.Object{}, err
	}
	kv, err := c.get(ctx, k, ekey)
	if err != nil {
		return model.Object{}, err
	}
	return model.Object{Key: k, Value: kv.Value, Revision: FormatRevision(kv.Revision)}, nil
}

// ReadMany makes the reads in one transaction.
func (c *Backend) ReadMany(ctx context.Context, reads []model.Read) ([][]model.Object, error) {
	if len(reads) == 0 {
		return nil, nil
	}
	ops := make([]clientv3.Op, len(reads))
	lists := make([]*model.ListOptions, len(reads))
	for i, r := range reads {
		op, err := readOp(r)
		if err != nil {
			return nil, err
		}
		ops[i], lists[i] = op, r.List
	}
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.etcd.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, unreachable("read", fmt.Sprint(reads), err)
	}
	out := make([][]model.Object, len(reads))
	for i, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().GetKvs() {
			k := reads[i].Key
			if lists[i] != nil {
				var ok bool
				if k, ok = selects(*lists[i], string(kv.Key)); !ok {
					continue
				}
			}
			out[i] = append(out[i], model.Object{Key: k, Value: kv.Value, Revision: FormatRevision(kv.ModRevision)})
		}
	}
	return out, nil
}

func readOp(r model.Read) (clientv3.Op, error) {
	if r.List != nil {
		prefix, err := listPrefix(*r.List)
		return clientv3.OpGet(prefix, clientv3.WithPrefix()), err
	}
	ekey, err := EtcdKey(r.Key)
	return clientv3.OpGet(ekey), err
}

// List reads every object opts selects.
func (c *Backend) List(ctx context.Context, opts model.ListOptions) ([]model.Object, model.Revision, error) {
	prefix, err := listPrefix(opts)
	if err != nil {
		return nil, "", err
	}
	kvs, rev, err := c.ListPrefix(ctx, prefix)
	if err != nil {
		return nil, "", err
	}
	out := make([]model.Object, 0, len(kvs))
	for _, kv := range kvs {
		if k, ok := selects(opts, kv.Key); ok {
			out = append(out, model.Object{Key: k, Value: kv.Value, Revision: FormatRevision(kv.Revision)})
		}
	}
	return out, FormatRevision(rev), nil
}

// Create stores a new object.
func (c *Backend) Create(ctx context.Context, k model.Key, value []byte) (model.Revision, error) {
	ekey, err := EtcdKey(k)
	if err != nil {
		return "", err
	}
	rev, err := c.create(ctx, k, ekey, value)
	if err != nil {
		return "", err
	}
	return FormatRevision(rev), nil
}

// Update replaces an object stored at rev. A lost compare is a
// *model.ConflictError carrying the stored object (Current nil: it is gone,
// and the error also matches model.ErrNotFound).
func (c *Backend) Update(ctx context.Context, k model.Key, value []byte, rev model.Revision) (model.Revision, error) {
	ekey, err := EtcdKey(k)
	if err != nil {
		return "", err
	}
	r, err := ParseRevision(rev)
	if err != nil {
		return "", fmt.Errorf("%s: %w", k, err)
	}
	if r == 0 {
		return "", fmt.Errorf("%s: an update needs the revision it replaces", k)
	}
	newRev, err := c.update(ctx, k, ekey, value, r)
	var ce *model.ConflictError
	if errors.As(err, &ce) && ce.Current == nil {
		return "", &goneError{ConflictError: ce}
	}
	if err != nil {
		return "", err
	}
	return FormatRevision(newRev), nil
}

// goneError is a compare-and-swap that lost because the object is gone: a
// conflict (as etcd's compare says) that is also not found (as the
// contract says).
type goneError struct{ *model.ConflictError }

func (e *goneError) Unwrap() error        { return e.ConflictError }
func (e *goneError) Is(target error) bool { return target == model.ErrNotFound }

// Delete removes an object stored at rev (any revision when rev is "").
func (c *Backend) Delete(ctx context.Context, k model.Key, rev model.Revision) error {
	ekey, err := EtcdKey(k)
	if err != nil {
		return err
	}
	r, err := ParseRevision(rev)
	if err != nil {
		return fmt.Errorf("%s: %w", k, err)
	}
	return c.delete(ctx, k, ekey, r)
}

// Atomic: Commit is one etcd transaction.
func (c *Backend) Atomic() bool { return true }

package etcdv3

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/calico-aio/calico-aio/store/model"
)

// FormatRevision is the opaque model revision of an etcd mod revision.
func FormatRevision(rev int64) model.Revision {
	return model.Revision(strconv.FormatInt(rev, 10))
}

// ParseRevision is the etcd mod revision a model revision names; "" is 0.
func ParseRevision(rev model.Revision) (int64, error) {
	if rev == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(rev), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q %w", string(rev), model.ErrInvalidRevision)
	}
	return n, nil
}

func unreachable(op, key string, err error) error {
	return fmt.Errorf("etcd %s %s: %w", op, key, err)
}

// The operations below act on etcd key ekey, named k in errors; the
// exported raw-key calls and the model calls (backend.go) share them.

func (c *Backend) get(ctx context.Context, k model.Key, ekey string) (KV, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.etcd.Get(ctx, ekey)
	if err != nil {
		return KV{}, unreachable("get", ekey, err)
	}
	if len(resp.Kvs) == 0 {
		return KV{}, &model.NotFoundError{Key: k}
	}
	kv := resp.Kvs[0]
	return KV{Key: ekey, Value: kv.Value, Revision: kv.ModRevision}, nil
}

func (c *Backend) create(ctx context.Context, k model.Key, ekey string, value []byte) (int64, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(ekey), "=", 0)).
		Then(clientv3.OpPut(ekey, string(value))).
		Commit()
	if err != nil {
		return 0, unreachable("create", ekey, err)
	}
	if !resp.Succeeded {
		return 0, &model.AlreadyExistsError{Key: k}
	}
	return resp.Header.Revision, nil
}

func (c *Backend) update(ctx context.Context, k model.Key, ekey string, value []byte, rev int64) (int64, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(ekey), "=", rev)).
		Then(clientv3.OpPut(ekey, string(value))).
		Else(clientv3.OpGet(ekey)).
		Commit()
	if err != nil {
		return 0, unreachable("update", ekey, err)
	}
	if !resp.Succeeded {
		return 0, conflictFrom(k, ekey, rev, resp)
	}
	return resp.Header.Revision, nil
}

func (c *Backend) delete(ctx context.Context, k model.Key, ekey string, rev int64) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cmp := clientv3.Compare(clientv3.Version(ekey), ">", 0)
	if rev != 0 {
		cmp = clientv3.Compare(clientv3.ModRevision(ekey), "=", rev)
	}
	resp, err := c.etcd.Txn(ctx).If(cmp).Then(clientv3.OpDelete(ekey)).Else(clientv3.OpGet(ekey)).Commit()
	if err != nil {
		return unreachable("delete", ekey, err)
	}
	if !resp.Succeeded {
		err := conflictFrom(k, ekey, rev, resp)
		if err.Current == nil {
			return &model.NotFoundError{Key: k}
		}
		return err
	}
	return nil
}

// conflictFrom is the conflict a lost compare on ekey (named k) returns,
// carrying what the transaction's Else read.
func conflictFrom(k model.Key, ekey string, rev int64, resp *clientv3.TxnResponse) *model.ConflictError {
	ce := &model.ConflictError{Key: k}
	if rev != 0 {
		ce.Expected = FormatRevision(rev)
	}
	if len(resp.Responses) > 0 {
		if r := resp.Responses[0].GetResponseRange(); r != nil && len(r.Kvs) > 0 && string(r.Kvs[0].Key) == ekey {
			ce.Current = &model.Object{Key: k, Value: r.Kvs[0].Value, Revision: FormatRevision(r.Kvs[0].ModRevision)}
		}
	}
	return ce
}

// rawKey names a raw etcd key in errors.
func rawKey(key string) model.Key { return model.Key{Name: key} }

// GetKey reads one raw key (etcd-only data; see Of).
func (c *Backend) GetKey(ctx context.Context, key string) (KV, error) {
	return c.get(ctx, rawKey(key), key)
}

// ListPrefix reads every raw key under prefix, and the store revision of
// the read.
func (c *Backend) ListPrefix(ctx context.Context, prefix string) ([]KV, int64, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.etcd.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, unreachable("list", prefix, err)
	}
	out := make([]KV, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		out[i] = KV{Key: string(kv.Key), Value: kv.Value, Revision: kv.ModRevision}
	}
	return out, resp.Header.Revision, nil
}

// CreateKey writes a raw key only if it does not exist and returns the new
// revision.
func (c *Backend) CreateKey(ctx context.Context, key string, value []byte) (int64, error) {
	return c.create(ctx, rawKey(key), key, value)
}

// UpdateKey writes a raw key only if its mod revision is still rev
// (compare-and-swap); a lost compare is a *model.ConflictError carrying the
// current value.
func (c *Backend) UpdateKey(ctx context.Context, key string, value []byte, rev int64) (int64, error) {
	return c.update(ctx, rawKey(key), key, value, rev)
}

// DeleteKey removes a raw key if its mod revision is rev; rev 0 deletes
// whatever is there.
func (c *Backend) DeleteKey(ctx context.Context, key string, rev int64) error {
	return c.delete(ctx, rawKey(key), key, rev)
}

// Compact compacts the store's history up to rev (tests and upkeep).
func (c *Backend) Compact(ctx context.Context, rev int64) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	if _, err := c.etcd.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return fmt.Errorf("etcd compact to %d: %w", rev, err)
	}
	return nil
}

package etcdv3

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/calico-aio/calico-aio/store/model"
)

// Commit applies writes in one transaction: all of them, or none when any
// revision precondition lost (a *model.ConflictError naming the first write
// whose precondition no longer holds, with what is stored now).
func (c *Backend) Commit(ctx context.Context, writes []model.Write) ([]model.Revision, error) {
	if len(writes) == 0 {
		return nil, nil
	}
	ekeys := make([]string, len(writes))
	cmps := make([]clientv3.Cmp, len(writes))
	ops := make([]clientv3.Op, len(writes))
	reads := make([]clientv3.Op, len(writes))
	for i, w := range writes {
		ekey, cmp, op, err := txnPart(w)
		if err != nil {
			return nil, err
		}
		ekeys[i], cmps[i], ops[i], reads[i] = ekey, cmp, op, clientv3.OpGet(ekey)
	}
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.etcd.Txn(ctx).If(cmps...).Then(ops...).Else(reads...).Commit()
	if err != nil {
		return nil, unreachable("transaction", fmt.Sprint(ekeys), err)
	}
	if !resp.Succeeded {
		return nil, lostWrite(writes, resp)
	}
	revs := make([]model.Revision, len(writes))
	for i, w := range writes {
		if w.Op == model.OpPut { // every put of the transaction has its revision
			revs[i] = FormatRevision(resp.Header.Revision)
		}
	}
	return revs, nil
}

// txnPart is one write's etcd key, precondition and operation.
func txnPart(w model.Write) (string, clientv3.Cmp, clientv3.Op, error) {
	ekey, err := EtcdKey(w.Key)
	if err != nil {
		return "", clientv3.Cmp{}, clientv3.Op{}, err
	}
	rev, err := ParseRevision(w.Revision)
	if err != nil {
		return "", clientv3.Cmp{}, clientv3.Op{}, fmt.Errorf("%s: %w", w.Key, err)
	}
	cmp := clientv3.Compare(clientv3.ModRevision(ekey), "=", rev)
	switch w.Op {
	case model.OpPut:
		return ekey, cmp, clientv3.OpPut(ekey, string(w.Value)), nil
	case model.OpDelete:
		if rev == 0 {
			cmp = clientv3.Compare(clientv3.Version(ekey), ">", 0)
		}
		return ekey, cmp, clientv3.OpDelete(ekey), nil
	}
	return "", clientv3.Cmp{}, clientv3.Op{}, fmt.Errorf("%s: write operation %d is neither put nor delete", w.Key, w.Op)
}

// lostWrite names the first write whose precondition the Else reads show
// lost.
func lostWrite(writes []model.Write, resp *clientv3.TxnResponse) error {
	for i, w := range writes {
		kvs := resp.Responses[i].GetResponseRange().GetKvs()
		ce := &model.ConflictError{Key: w.Key, Expected: w.Revision}
		if len(kvs) > 0 {
			ce.Current = &model.Object{Key: w.Key, Value: kvs[0].Value, Revision: FormatRevision(kvs[0].ModRevision)}
		}
		switch {
		case w.Op == model.OpDelete && w.Revision == "" && ce.Current == nil:
			return ce
		case w.Revision == "" && w.Op == model.OpPut && ce.Current != nil:
			return ce
		case w.Revision != "" && (ce.Current == nil || ce.Current.Revision != w.Revision):
			return ce
		}
	}
	return &model.ConflictError{Key: writes[0].Key, Expected: writes[0].Revision}
}

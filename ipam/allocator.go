package ipam

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/calico-aio/calico-aio/store"
)

// maxRetries bounds compare-and-swap retries of one operation.
const maxRetries = 50

// Allocator hands out and releases addresses. It keeps no state between
// calls beyond counters: every decision is made on what etcd says now.
type Allocator struct {
	c   *store.Client
	now func() time.Time

	roundTrips atomic.Int64
	conflicts  atomic.Int64
}

// New returns an allocator over a store client.
func New(c *store.Client) *Allocator {
	return &Allocator{c: c, now: time.Now}
}

// Stats are counters since the allocator was made.
type Stats struct {
	RoundTrips int64 // etcd requests made
	Conflicts  int64 // compare-and-swap writes that lost and were retried
}

// Stats returns the counters.
func (a *Allocator) Stats() Stats {
	return Stats{RoundTrips: a.roundTrips.Load(), Conflicts: a.conflicts.Load()}
}

func (a *Allocator) timestamp() string { return a.now().UTC().Format(time.RFC3339) }

// txn runs one etcd transaction (one round trip) with the client's timeout.
func (a *Allocator) txn(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	a.roundTrips.Add(1)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := a.c.Etcd().Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
	if err != nil {
		return nil, fmt.Errorf("etcd transaction: %w", err)
	}
	return resp, nil
}

func (a *Allocator) get(ctx context.Context, key string) (store.KV, error) {
	a.roundTrips.Add(1)
	return a.c.Get(ctx, key)
}

func (a *Allocator) list(ctx context.Context, prefix string) ([]store.KV, error) {
	a.roundTrips.Add(1)
	kvs, _, err := a.c.List(ctx, prefix)
	return kvs, err
}

// kvsOf returns the key-values of the i-th response of a transaction.
func kvsOf(resp *clientv3.TxnResponse, i int) []store.KV {
	r := resp.Responses[i].GetResponseRange()
	if r == nil {
		return nil
	}
	out := make([]store.KV, len(r.Kvs))
	for j, kv := range r.Kvs {
		out[j] = store.KV{Key: string(kv.Key), Value: kv.Value, Revision: kv.ModRevision}
	}
	return out
}

// blockKV is a block with the revision it was read at (0: not stored yet).
type blockKV struct {
	block *Block
	rev   int64
	dirty bool
}

func parseBlock(kv store.KV) (*Block, error) {
	b := &Block{}
	if err := json.Unmarshal(kv.Value, b); err != nil {
		return nil, fmt.Errorf("block %s: %w", kv.Key, err)
	}
	if b.SequenceNumberForAllocation == nil {
		b.SequenceNumberForAllocation = map[string]uint64{}
	}
	if b.Attributes == nil {
		b.Attributes = []AllocationAttributes{}
	}
	return b, nil
}

// readBlocks reads blocks by CIDR in one transaction; missing ones are
// absent from the result.
func (a *Allocator) readBlocks(ctx context.Context, cidrs []string) (map[string]*blockKV, error) {
	out := map[string]*blockKV{}
	if len(cidrs) == 0 {
		return out, nil
	}
	ops := make([]clientv3.Op, len(cidrs))
	for i, c := range cidrs {
		key, err := blockKeyOf(c)
		if err != nil {
			return nil, err
		}
		ops[i] = clientv3.OpGet(key)
	}
	resp, err := a.txn(ctx, nil, ops, nil)
	if err != nil {
		return nil, err
	}
	for i := range cidrs {
		for _, kv := range kvsOf(resp, i) {
			b, err := parseBlock(kv)
			if err != nil {
				return nil, err
			}
			out[b.CIDR] = &blockKV{block: b, rev: kv.Revision}
		}
	}
	return out, nil
}

// writeOps are the compares and puts that commit changed blocks and handles.
type writeOps struct {
	cmps []clientv3.Cmp
	ops  []clientv3.Op
}

func (w *writeOps) putBlock(cidr string, bk *blockKV) error {
	key, err := blockKeyOf(cidr)
	if err != nil {
		return err
	}
	val, err := json.Marshal(bk.block)
	if err != nil {
		return err
	}
	w.cmps = append(w.cmps, clientv3.Compare(clientv3.ModRevision(key), "=", bk.rev))
	w.ops = append(w.ops, clientv3.OpPut(key, string(val)))
	return nil
}

func (w *writeOps) deleteBlock(cidr string, bk *blockKV) error {
	key, err := blockKeyOf(cidr)
	if err != nil {
		return err
	}
	w.cmps = append(w.cmps, clientv3.Compare(clientv3.ModRevision(key), "=", bk.rev))
	w.ops = append(w.ops, clientv3.OpDelete(key))
	return nil
}

func (w *writeOps) putHandle(id string, h *Handle, rev int64) {
	key := store.HandleKey(id)
	w.cmps = append(w.cmps, clientv3.Compare(clientv3.ModRevision(key), "=", rev))
	if h.empty() {
		w.ops = append(w.ops, clientv3.OpDelete(key))
		return
	}
	val, _ := json.Marshal(h)
	w.ops = append(w.ops, clientv3.OpPut(key, string(val)))
}

// commit runs the write; false means a compare lost (retry).
func (a *Allocator) commit(ctx context.Context, w *writeOps) (bool, error) {
	if len(w.ops) == 0 {
		return true, nil
	}
	resp, err := a.txn(ctx, w.cmps, w.ops, nil)
	if err != nil {
		return false, err
	}
	if !resp.Succeeded {
		a.conflicts.Add(1)
	}
	return resp.Succeeded, nil
}

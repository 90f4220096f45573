package ipam

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/calico-aio/calico-aio/store"
)

// maxRetries bounds compare-and-swap retries of one operation.
const maxRetries = 50

// Allocator hands out and releases addresses. It keeps no state between
// calls beyond counters: every decision is made on what etcd says now.
type Allocator struct {
	c     *store.Client
	now   func() time.Time
	hints *BlockHints // nil: none (hints.go)
	pre   *prefetch   // a first read under way (prefetch.go)

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

// readMany makes several reads in one round trip (one etcd transaction).
func (a *Allocator) readMany(ctx context.Context, reads []store.Read) ([][]store.Object, error) {
	a.roundTrips.Add(1)
	return a.c.ReadMany(ctx, reads)
}

func (a *Allocator) get(ctx context.Context, k store.Key) (store.Object, error) {
	a.roundTrips.Add(1)
	return a.c.Get(ctx, k)
}

func (a *Allocator) list(ctx context.Context, opts store.ListOptions) ([]store.Object, error) {
	a.roundTrips.Add(1)
	objs, _, err := a.c.List(ctx, opts)
	return objs, err
}

// blockKV is a block with the revision it was read at ("": not stored yet).
// A block read with a snapshot may be held unparsed (block nil, raw its
// stored value: lazyBlocks) until load.
type blockKV struct {
	block *Block
	raw   *store.Object
	rev   store.Revision
	dirty bool
}

// load parses a block held unparsed.
func (bk *blockKV) load() error {
	if bk.block != nil {
		return nil
	}
	b, err := parseBlock(*bk.raw)
	if err != nil {
		return err
	}
	if b.CIDR != bk.raw.Key.Name {
		return fmt.Errorf("block %s: holds cidr %q", bk.raw.Key.Name, b.CIDR)
	}
	bk.block, bk.raw = b, nil
	return nil
}

// noFreeMarks are how a stored block with no free address spells its
// free list: our writes, Calico's, and the Kubernetes backend's.
var noFreeMarks = [][]byte{[]byte(`"unallocated":[]`), []byte(`"unallocated":null`)}

// full reports whether the block has no free address, without parsing
// one held unparsed: its stored value has an empty free list (any other
// spelling, e.g. with blanks, parses it).
func (bk *blockKV) full() bool {
	if bk.block != nil {
		return bk.block.Free() == 0
	}
	for _, m := range noFreeMarks {
		if bytes.Contains(bk.raw.Value, m) {
			return true
		}
	}
	if bk.load() != nil {
		return false // the caller's load reports it
	}
	return bk.block.Free() == 0
}

func parseBlock(o store.Object) (*Block, error) {
	b := &Block{}
	if err := json.Unmarshal(o.Value, b); err != nil {
		return nil, fmt.Errorf("block %s: %w", o.Key.Name, err)
	}
	if b.SequenceNumberForAllocation == nil {
		b.SequenceNumberForAllocation = map[string]uint64{}
	}
	if b.Attributes == nil {
		b.Attributes = []AllocationAttributes{}
	}
	return b, nil
}

// readBlocks reads blocks by CIDR in one round trip; missing ones are
// absent from the result.
func (a *Allocator) readBlocks(ctx context.Context, cidrs []string) (map[string]*blockKV, error) {
	out := map[string]*blockKV{}
	if len(cidrs) == 0 {
		return out, nil
	}
	reads := make([]store.Read, len(cidrs))
	for i, c := range cidrs {
		k, err := blockKeyOf(c)
		if err != nil {
			return nil, err
		}
		reads[i] = store.Read{Key: k}
	}
	got, err := a.readMany(ctx, reads)
	if err != nil {
		return nil, err
	}
	return parseBlocks(got)
}

// lazyBlocks are the blocks of reads by CIDR, held unparsed: a snapshot
// reads every block of the node, and an assignment usually looks into one
// (parsing a block's allocations and attributes was most of the cost of
// an ADD's IPAM at a few hundred pods). A block whose key is not its
// canonical CIDR is parsed now, as parseBlocks does.
func lazyBlocks(got [][]store.Object) (map[string]*blockKV, error) {
	out := map[string]*blockKV{}
	for _, objs := range got {
		for i := range objs {
			o := &objs[i]
			if p, err := netip.ParsePrefix(o.Key.Name); err != nil || p.String() != o.Key.Name {
				b, err := parseBlock(*o)
				if err != nil {
					return nil, err
				}
				out[b.CIDR] = &blockKV{block: b, rev: o.Revision}
				continue
			}
			out[o.Key.Name] = &blockKV{raw: o, rev: o.Revision}
		}
	}
	return out, nil
}

// parseBlocks are the blocks of reads by key, by CIDR.
func parseBlocks(got [][]store.Object) (map[string]*blockKV, error) {
	out := map[string]*blockKV{}
	for _, objs := range got {
		for _, o := range objs {
			b, err := parseBlock(o)
			if err != nil {
				return nil, err
			}
			out[b.CIDR] = &blockKV{block: b, rev: o.Revision}
		}
	}
	return out, nil
}

// affineBlocks are the blocks cidrs of the node: those read with the
// snapshot (hinted), the others read now.
func (a *Allocator) affineBlocks(ctx context.Context, snap *snapshot, cidrs []string) (map[string]*blockKV, error) {
	var missing []string
	for _, c := range cidrs {
		if snap.hinted[c] == nil {
			missing = append(missing, c)
		}
	}
	out, err := a.readBlocks(ctx, missing)
	if err != nil {
		return nil, err
	}
	for _, c := range cidrs {
		if bk := snap.hinted[c]; bk != nil {
			out[c] = bk
		}
	}
	return out, nil
}

// writeOps are the writes that commit changed blocks, handles and
// affinities, in Calico's order: the caller adds the handle before the
// blocks on assign, and the blocks before the handle on release.
type writeOps struct {
	writes []store.Write
	// undo, when set, is what Calico undoes when a write after the handle
	// loses on a backend whose Commit is not atomic: the handle's increment.
	undo func(ctx context.Context) error
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
	w.writes = append(w.writes, store.Write{Op: store.OpPut, Key: key, Value: val, Revision: bk.rev})
	return nil
}

func (w *writeOps) deleteBlock(cidr string, bk *blockKV) error {
	key, err := blockKeyOf(cidr)
	if err != nil {
		return err
	}
	w.writes = append(w.writes, store.Write{Op: store.OpDelete, Key: key, Revision: bk.rev})
	return nil
}

// putHandle writes h, or deletes it when it holds nothing (nothing to
// write when it was never stored).
func (w *writeOps) putHandle(id string, h *Handle, rev store.Revision) {
	key := handleKey(id)
	if h.empty() {
		if rev != "" {
			w.writes = append(w.writes, store.Write{Op: store.OpDelete, Key: key, Revision: rev})
		}
		return
	}
	val, _ := json.Marshal(h)
	w.writes = append(w.writes, store.Write{Op: store.OpPut, Key: key, Value: val, Revision: rev})
}

// commit runs the writes in one round trip; false means a revision
// precondition lost (retry). On a backend that applies writes one at a
// time, what Calico undoes after a partial write is undone first.
func (a *Allocator) commit(ctx context.Context, w *writeOps) (bool, error) {
	if len(w.writes) == 0 {
		return true, nil
	}
	a.roundTrips.Add(1)
	revs, err := a.c.Commit(ctx, w.writes)
	a.hints.noteWrites(w.writes, revs)
	if errors.Is(err, store.ErrConflict) {
		a.conflicts.Add(1)
		if len(revs) > 0 && w.undo != nil && !a.c.Atomic() {
			if uerr := w.undo(ctx); uerr != nil {
				return false, fmt.Errorf("undoing a partial IPAM write: %w", uerr)
			}
		}
		return false, nil
	}
	return err == nil, err
}

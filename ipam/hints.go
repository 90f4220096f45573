package ipam

import (
	"context"
	"slices"
	"sync"

	"github.com/calico-aio/calico-aio/store"
)

// BlockHints remember, per node, the affine blocks an assignment read, so
// that the next assignment on that node (in a long-lived process: the
// agent serving CNI calls) reads them together with its snapshot instead
// of in a round trip of their own. A hint only says which blocks to read:
// what is read is current, and a block that is no longer the node's is
// not used.
//
// They also remember the blocks the process wrote, in order, so that a
// snapshot read before one of them was written (a burst of ADDs prefetch
// at once, then take the IPAM lock in turn) takes that block as the write
// left it (or reads it again, when the write's outcome is not known)
// rather than lose its compare-and-swap on it: on Kubernetes a lost write
// costs the handle's undo (three requests) and a whole new snapshot. A
// block written by another process since still costs that retry.
type BlockHints struct {
	mu sync.Mutex
	m  map[string][]string // node -> block CIDRs
	// writes counts this process's block writes; wrote is each block's
	// last, by CIDR.
	writes uint64
	wrote  map[string]blockWrite
}

// blockWrite is this process's last write of a block: when (the writes
// count after it) and what it left.
type blockWrite struct {
	seq uint64
	// left is the block as stored after the write (its value and the
	// revision the write returned); nil when the write deleted it or when
	// it is not known whether it applied.
	left    *store.Object
	deleted bool
}

// maxHintedNodes bounds the nodes remembered (an agent has one).
const maxHintedNodes = 64

// NewBlockHints is an empty memory.
func NewBlockHints() *BlockHints {
	return &BlockHints{m: map[string][]string{}, wrote: map[string]blockWrite{}}
}

// maxWrittenBlocks bounds the blocks whose writes are remembered.
const maxWrittenBlocks = 4096

// mark is the count of block writes so far: a read begun after it sees
// every block written before it.
func (h *BlockHints) mark() uint64 {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writes
}

// noteWrites records the blocks among writes once a Commit of them is
// done, revs the revisions of those it applied (Backend.Commit).
func (h *BlockHints) noteWrites(writes []store.Write, revs []store.Revision) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, w := range writes {
		if w.Key.Kind != store.KindIPAMBlock {
			continue
		}
		if _, ok := h.wrote[w.Key.Name]; !ok && len(h.wrote) >= maxWrittenBlocks {
			clear(h.wrote) // forgetting only costs a retry
		}
		h.writes++
		bw := blockWrite{seq: h.writes}
		switch {
		case i >= len(revs): // not applied, or not known to be
		case w.Op == store.OpDelete:
			bw.deleted = true
		default:
			bw.left = &store.Object{Key: w.Key, Value: w.Value, Revision: revs[i]}
		}
		h.wrote[w.Key.Name] = bw
	}
}

// writtenSince are this process's last writes, after mark m, of blocks, by
// CIDR.
func (h *BlockHints) writtenSince(m uint64, blocks map[string]*blockKV) map[string]blockWrite {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out map[string]blockWrite
	for c := range blocks {
		if bw := h.wrote[c]; bw.seq > m {
			if out == nil {
				out = map[string]blockWrite{}
			}
			out[c] = bw
		}
	}
	return out
}

// WithHints makes the allocator read and update h.
func (a *Allocator) WithHints(h *BlockHints) *Allocator {
	a.hints = h
	return a
}

func (h *BlockHints) get(node string) []string {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.m[node])
}

func (h *BlockHints) set(node string, cidrs []string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.m[node]; !ok && len(h.m) >= maxHintedNodes {
		clear(h.m)
	}
	h.m[node] = slices.Clone(cidrs)
}

// remember makes the blocks of node among blocks (those it held or
// claimed in an assignment) its hint.
func (h *BlockHints) remember(node string, blocks map[string]*blockKV) {
	if h == nil {
		return
	}
	var cidrs []string
	for c, bk := range blocks {
		// One held unparsed was read as the node's and not looked into.
		if bk.block == nil || bk.block.AffineTo(node) {
			cidrs = append(cidrs, c)
		}
	}
	slices.Sort(cidrs)
	h.set(node, cidrs)
}

// catchUpWritten brings the blocks of snap that this process wrote since
// snap's read began (writtenSince) up to date: as the write left them,
// else (a write whose outcome is not known) read again at the latest.
func (a *Allocator) catchUpWritten(ctx context.Context, snap *snapshot) error {
	var unknown []string
	for c, bw := range a.hints.writtenSince(snap.mark, snap.hinted) {
		switch {
		case bw.left != nil:
			left := *bw.left
			snap.hinted[c] = &blockKV{raw: &left, rev: left.Revision}
		case bw.deleted:
			delete(snap.hinted, c)
		default:
			unknown = append(unknown, c)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	fresh, err := a.readBlocks(store.LatestReads(ctx), unknown)
	if err != nil {
		return err
	}
	for _, c := range unknown {
		if bk, ok := fresh[c]; ok {
			snap.hinted[c] = bk
		} else {
			delete(snap.hinted, c)
		}
	}
	return nil
}

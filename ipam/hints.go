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
// They also remember which blocks the process wrote, in order, so that a
// snapshot read before one of them was written (a burst of ADDs prefetch
// at once, then take the IPAM lock in turn) reads that block again under
// the lock rather than lose its compare-and-swap on it: on Kubernetes a
// lost write costs the handle's undo (three requests) and a whole new
// snapshot. A block written by another process still costs that retry.
type BlockHints struct {
	mu sync.Mutex
	m  map[string][]string // node -> block CIDRs
	// writes counts this process's block writes; wrote is the count at
	// each block's last write, by CIDR.
	writes uint64
	wrote  map[string]uint64
}

// maxHintedNodes bounds the nodes remembered (an agent has one).
const maxHintedNodes = 64

// NewBlockHints is an empty memory.
func NewBlockHints() *BlockHints {
	return &BlockHints{m: map[string][]string{}, wrote: map[string]uint64{}}
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

// noteWrites records the blocks among writes, once the writes are done
// (applied or not: a block to read again costs one read).
func (h *BlockHints) noteWrites(writes []store.Write) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range writes {
		if w.Key.Kind != store.KindIPAMBlock {
			continue
		}
		if _, ok := h.wrote[w.Key.Name]; !ok && len(h.wrote) >= maxWrittenBlocks {
			clear(h.wrote) // forgetting only costs a retry
		}
		h.writes++
		h.wrote[w.Key.Name] = h.writes
	}
}

// writtenSince are the CIDRs among blocks that this process wrote after
// mark m, sorted.
func (h *BlockHints) writtenSince(m uint64, blocks map[string]*blockKV) []string {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for c := range blocks {
		if h.wrote[c] > m {
			out = append(out, c)
		}
	}
	slices.Sort(out)
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

// rereadWritten reads again, at the latest, the blocks of snap that this
// process wrote since snap's read began (writtenSince).
func (a *Allocator) rereadWritten(ctx context.Context, snap *snapshot) error {
	stale := a.hints.writtenSince(snap.mark, snap.hinted)
	if len(stale) == 0 {
		return nil
	}
	reads := make([]store.Read, 0, len(stale))
	for _, c := range stale {
		k, err := blockKeyOf(c)
		if err != nil {
			return err
		}
		reads = append(reads, store.Read{Key: k})
	}
	resp, err := a.readMany(store.LatestReads(ctx), reads)
	if err != nil {
		return err
	}
	fresh, err := lazyBlocks(resp)
	if err != nil {
		return err
	}
	for _, c := range stale {
		if bk, ok := fresh[c]; ok {
			snap.hinted[c] = bk
		} else {
			delete(snap.hinted, c)
		}
	}
	return nil
}

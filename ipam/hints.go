package ipam

import (
	"slices"
	"sync"
)

// BlockHints remember, per node, the affine blocks an assignment read, so
// that the next assignment on that node (in a long-lived process: the
// agent serving CNI calls) reads them together with its snapshot instead
// of in a round trip of their own. A hint only says which blocks to read:
// what is read is current, and a block that is no longer the node's is
// not used.
type BlockHints struct {
	mu sync.Mutex
	m  map[string][]string // node -> block CIDRs
}

// maxHintedNodes bounds the nodes remembered (an agent has one).
const maxHintedNodes = 64

// NewBlockHints is an empty memory.
func NewBlockHints() *BlockHints { return &BlockHints{m: map[string][]string{}} }

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

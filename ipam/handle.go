package ipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/calico-aio/calico-aio/store"
)

// Handle is the index from an owner to its addresses' blocks, stored at
// /calico/ipam/v2/handle/<id>: {"block":{"10.65.0.0/26":1},"deleted":false}.
type Handle struct {
	Block   map[string]int `json:"block"`
	Deleted bool           `json:"deleted"`
}

func parseHandle(id string, val []byte) (*Handle, error) {
	h := &Handle{}
	if err := json.Unmarshal(val, h); err != nil {
		return nil, fmt.Errorf("handle %s: %w", id, err)
	}
	if h.Block == nil {
		h.Block = map[string]int{}
	}
	return h, nil
}

// add changes the count of block cidr by n, dropping it at zero.
func (h *Handle) add(cidr string, n int) {
	h.Block[cidr] += n
	if h.Block[cidr] <= 0 {
		delete(h.Block, cidr)
	}
}

func (h *Handle) empty() bool { return len(h.Block) == 0 }

// handleDelta is what this attempt added to the handle, per block.
func (t *tx) handleDelta() map[string]int {
	d := maps.Clone(t.handle.Block)
	if t.snap.handle != nil {
		for c, n := range t.snap.handle.Block {
			d[c] -= n
		}
	}
	return d
}

// undoHandle takes back an increment of handle id (delta, per block) whose
// block write lost, as Calico's IPAM does on a backend without
// transactions; a handle left holding nothing is deleted.
func (a *Allocator) undoHandle(ctx context.Context, id string, delta map[string]int) error {
	for attempt := 0; attempt < maxRetries; attempt++ {
		h, rev, err := a.readHandle(ctx, id)
		if err != nil || h == nil {
			return err
		}
		for c, n := range delta {
			h.add(c, -n)
		}
		a.roundTrips.Add(1)
		if h.empty() {
			err = a.c.Delete(ctx, handleKey(id), rev)
		} else {
			val, _ := json.Marshal(h)
			_, err = a.c.Update(ctx, handleKey(id), val, rev)
		}
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		backoff(attempt)
	}
	return fmt.Errorf("undoing handle %s: gave up after %d conflicting attempts", id, maxRetries)
}

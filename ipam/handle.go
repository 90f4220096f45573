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
// transactions.
func (a *Allocator) undoHandle(ctx context.Context, id string, delta map[string]int) error {
	return a.changeHandle(ctx, id, negated(delta))
}

// changeHandle adds delta (per block) to handle id's counts, by
// compare-and-swap; a handle left holding nothing is deleted
// (deleteHandle). A handle already marked deleted has its delete finished.
func (a *Allocator) changeHandle(ctx context.Context, id string, delta map[string]int) error {
	return a.changeHandleFrom(ctx, id, delta, nil, "")
}

// changeHandleFrom is changeHandle from handle h as read at rev, when the
// caller has just read it (nil: read it first); a write that loses reads
// it again.
func (a *Allocator) changeHandleFrom(ctx context.Context, id string, delta map[string]int, h *Handle, rev store.Revision) error {
	for attempt := 0; attempt < maxRetries; attempt++ {
		var err error
		if attempt > 0 || h == nil {
			if h, rev, err = a.readStoredHandle(ctx, id); err != nil || h == nil {
				return err
			}
		}
		if !h.Deleted {
			for c, n := range delta {
				h.add(c, n)
			}
		}
		switch {
		case h.Deleted:
			return a.finishHandleDelete(ctx, id, rev)
		case h.empty():
			err = a.deleteHandle(ctx, id, rev)
		default:
			val, _ := json.Marshal(h)
			a.roundTrips.Add(1)
			_, err = a.c.Update(ctx, handleKey(id), val, rev)
		}
		if errors.Is(err, store.ErrNotFound) {
			return nil // deleted by another writer
		}
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		backoff(attempt)
	}
	return fmt.Errorf("updating handle %s: gave up after %d conflicting attempts", id, maxRetries)
}

// deleteHandle deletes handle id stored at rev. Without transactions it
// does so as Calico does on the Kubernetes datastore: the handle is first
// written {"block":{},"deleted":true} (compare-and-swap at rev), then
// deleted at the revision that write returned (the Kubernetes backend adds
// the handle's uid as a precondition). Once marked, the handle holds
// nothing and nobody adds to it: whoever reads it next takes it as absent
// and finishes its delete (finishHandleDelete), so an assignment to the
// same handle creates a new one rather than counting its address in one
// about to disappear.
func (a *Allocator) deleteHandle(ctx context.Context, id string, rev store.Revision) error {
	if !a.c.Atomic() {
		val, _ := json.Marshal(Handle{Block: map[string]int{}, Deleted: true})
		a.roundTrips.Add(1)
		r, err := a.c.Update(ctx, handleKey(id), val, rev)
		if err != nil {
			return err
		}
		rev = r
	}
	a.roundTrips.Add(1)
	return a.c.Delete(ctx, handleKey(id), rev)
}

// finishHandleDelete deletes a handle found marked deleted at rev; that
// it is already gone, or changed, is no error (another reader finished it).
func (a *Allocator) finishHandleDelete(ctx context.Context, id string, rev store.Revision) error {
	a.roundTrips.Add(1)
	err := a.c.Delete(ctx, handleKey(id), rev)
	if err != nil && !lostRace(err) {
		return fmt.Errorf("finishing the delete of handle %s: %w", id, err)
	}
	return nil
}

package calicoipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/calico-aio/calico-aio/store/kdd"
)

// newHandle is the handle id holding n addresses of the block cidr.
func newHandle(id string, cidr netip.Prefix, n int) ipamHandle {
	return ipamHandle{
		typeMeta: typeMeta{apiVersion, "IPAMHandle"},
		Metadata: ipamMeta(kdd.HandleName(id), nil, "", ""),
		Spec:     handleSpec{Block: map[string]int{cidr.String(): n}, HandleID: id},
	}
}

// forWrite is h as Calico sends it back: with its resourceVersion and uid.
func (h ipamHandle) forWrite() ipamHandle {
	h.typeMeta = typeMeta{apiVersion, "IPAMHandle"}
	h.Metadata = ipamMeta(h.Metadata.Name, nil, h.Metadata.ResourceVersion, h.Metadata.UID)
	return h
}

// getHandle reads the handle id; nil when there is none.
func (d *Double) getHandle(ctx context.Context, id string) (*ipamHandle, error) {
	var h ipamHandle
	err := d.conn.get(ctx, handlePath(id), &h)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// incrementHandle counts one more address of the block cidr on the handle
// id, creating it when it does not exist (before the block is written, as
// Calico does).
func (d *Double) incrementHandle(ctx context.Context, id string, cidr netip.Prefix) error {
	for range maxAttempts {
		h, err := d.getHandle(ctx, id)
		if err != nil {
			return err
		}
		if h == nil {
			err = d.conn.create(ctx, crdAPI+"/ipamhandles", newHandle(id, cidr, 1), nil)
		} else {
			if h.Spec.Block == nil {
				h.Spec.Block = map[string]int{}
			}
			h.Spec.Block[cidr.String()]++
			h.Spec.Deleted = false
			err = d.conn.update(ctx, handlePath(id), h.forWrite(), nil)
		}
		if errors.Is(err, ErrAlreadyExists) || errors.Is(err, ErrConflict) {
			d.conflicts.Add(1)
			continue
		}
		return err
	}
	return fmt.Errorf("handle %s: still conflicting after %d attempts", id, maxAttempts)
}

// decrementHandle counts n fewer addresses of the block cidr on the handle
// id. A handle left empty is marked deleted ({deleted: true, block: {}}),
// read again and deleted on the condition of its uid, as Calico does.
func (d *Double) decrementHandle(ctx context.Context, id string, cidr netip.Prefix, n int) error {
	for range maxAttempts {
		h, err := d.getHandle(ctx, id)
		if err != nil || h == nil {
			return err
		}
		if left := h.Spec.Block[cidr.String()] - n; left > 0 {
			h.Spec.Block[cidr.String()] = left
		} else {
			delete(h.Spec.Block, cidr.String())
		}
		if len(h.Spec.Block) == 0 {
			h.Spec.Block = map[string]int{}
			h.Spec.Deleted = true
		}
		err = d.conn.update(ctx, handlePath(id), h.forWrite(), nil)
		if errors.Is(err, ErrConflict) {
			d.conflicts.Add(1)
			continue
		}
		if err != nil || !h.Spec.Deleted {
			return err
		}
		return d.deleteHandle(ctx, id)
	}
	return fmt.Errorf("handle %s: still conflicting after %d attempts", id, maxAttempts)
}

// deleteHandle deletes the handle id, read again, on the condition of its
// uid; a handle gone meanwhile is fine.
func (d *Double) deleteHandle(ctx context.Context, id string) error {
	h, err := d.getHandle(ctx, id)
	if err != nil || h == nil {
		return err
	}
	err = d.conn.deleteUID(ctx, handlePath(id), h.Metadata.UID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

package calicoipam

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/calico-aio/calico-aio/store/kdd/derive"
)

// Release frees the pod's addresses, with Calico's requests in Calico's
// order (see the package comment). Releasing what is already gone succeeds.
func (d *Double) Release(ctx context.Context, p Pod) error {
	defer d.lockNode(p.Node)()
	if err := d.checkReady(ctx); err != nil {
		return err
	}
	pod, err := d.getPod(ctx, p)
	if err != nil {
		return err
	}
	if pod != nil {
		patch, err := derive.DelPatch(pod.Metadata.ResourceVersion, pod.Metadata.UID)
		if err != nil {
			return err
		}
		if err := d.conn.patchStatus(ctx, podPath(p.Namespace, p.Name), patch); err != nil {
			return err
		}
	}
	released, err := d.releaseHandle(ctx, d.HandleID(p))
	if err != nil {
		return fmt.Errorf("releasing %s/%s on %s: %w", p.Namespace, p.Name, p.Node, err)
	}
	if released {
		// Calico reads these after a release; the double uses neither.
		if _, err := d.nodeLabels(ctx, p.Node); err != nil {
			return err
		}
		if err := d.conn.list(ctx, crdAPI+"/ippools", nil, nil); err != nil {
			return err
		}
	}
	// The handle ID of older Calico versions: <namespace>.<pod>.
	if _, err := d.releaseHandle(ctx, p.Namespace+"."+p.Name); err != nil {
		return fmt.Errorf("releasing %s/%s on %s: %w", p.Namespace, p.Name, p.Node, err)
	}
	return nil
}

// releaseHandle frees every address of the handle id, block by block, and
// then the handle. It reports whether there was a handle.
func (d *Double) releaseHandle(ctx context.Context, id string) (bool, error) {
	h, err := d.getHandle(ctx, id)
	if err != nil || h == nil {
		return false, err
	}
	for _, s := range slices.Sorted(maps.Keys(h.Spec.Block)) {
		cidr, err := parseCIDR(s)
		if err != nil {
			return true, fmt.Errorf("handle %s: %w", id, err)
		}
		if err := d.releaseInBlock(ctx, id, cidr); err != nil {
			return true, err
		}
		// The block no longer holds any address of the handle: its count
		// for the block goes, whatever it said.
		if err := d.decrementHandle(ctx, id, cidr, h.Spec.Block[s]); err != nil {
			return true, err
		}
	}
	if len(h.Spec.Block) == 0 {
		return true, d.deleteHandle(ctx, id)
	}
	return true, nil
}

// releaseInBlock frees the handle's ordinals of the block cidr by
// compare-and-swap; a block gone or without them is left alone.
func (d *Double) releaseInBlock(ctx context.Context, id string, cidr netip.Prefix) error {
	for range maxAttempts {
		var b ipamBlock
		err := d.conn.get(ctx, blockPath(cidr), &b)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if b.Spec.release(id) == 0 {
			return nil
		}
		err = d.conn.update(ctx, blockPath(cidr), b.forWrite(), nil)
		if !errors.Is(err, ErrConflict) {
			return err
		}
		d.conflicts.Add(1)
	}
	return fmt.Errorf("block %s: still conflicting after %d attempts", cidr, maxAttempts)
}

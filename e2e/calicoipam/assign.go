package calicoipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/calico-aio/calico-aio/store/kdd/derive"
)

// errNoRoom says a block has no free address left (or is gone).
var errNoRoom = errors.New("no free address in the block")

// Assign allocates one IPv4 address for the pod on its node, with Calico's
// requests in Calico's order (see the package comment), and records it on
// the pod's status when the pod exists.
func (d *Double) Assign(ctx context.Context, p Pod) (netip.Addr, error) {
	defer d.lockNode(p.Node)()
	if err := d.checkReady(ctx); err != nil {
		return netip.Addr{}, err
	}
	pod, err := d.readPod(ctx, p)
	if err != nil {
		return netip.Addr{}, err
	}
	e, err := d.readEnv(ctx, p.Node)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(e.pools) == 0 {
		return netip.Addr{}, fmt.Errorf("node %s: no enabled IPv4 pool for workloads matches the node", p.Node)
	}
	affinities, err := d.listAffinities(ctx, p.Node)
	if err != nil {
		return netip.Addr{}, err
	}
	cfg, err := d.ipamConfig(ctx)
	if err != nil {
		return netip.Addr{}, err
	}
	addr, err := d.assign(ctx, p, e, affinities, cfg)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("assigning %s/%s on %s: %w", p.Namespace, p.Name, p.Node, err)
	}
	if pod == nil {
		return addr, nil
	}
	patch, err := derive.AddPatch(p.ContainerID, []netip.Prefix{netip.PrefixFrom(addr, addr.BitLen())})
	if err != nil {
		return addr, err
	}
	return addr, d.conn.patchStatus(ctx, podPath(p.Namespace, p.Name), patch)
}

// assign tries the node's confirmed blocks in turn, then claims new ones.
func (d *Double) assign(ctx context.Context, p Pod, e env, affinities []blockAffinity, cfg ipamConfigSpec) (netip.Addr, error) {
	for _, a := range affinities {
		cidr, err := parseCIDR(a.Spec.CIDR)
		if err != nil || a.Spec.State != stateConfirmed || a.Spec.Deleted == "true" || !e.inPool(cidr) {
			continue
		}
		// Read again, as Calico does, then the block itself.
		var fresh blockAffinity
		if err := d.conn.get(ctx, affinityPath(p.Node, cidr), &fresh); err != nil {
			if errors.Is(err, ErrNotFound) {
				continue
			}
			return netip.Addr{}, err
		}
		addr, err := d.allocateIn(ctx, p, e, cidr, nil)
		if !errors.Is(err, errNoRoom) {
			return addr, err
		}
	}
	if !cfg.AutoAllocateBlocks {
		return netip.Addr{}, errors.New("the node's blocks are full and IPAMConfig default has autoAllocateBlocks false")
	}
	if cfg.MaxBlocksPerHost > 0 && len(affinities) >= cfg.MaxBlocksPerHost {
		return netip.Addr{}, fmt.Errorf("the node's %d blocks are full and IPAMConfig default has maxBlocksPerHost %d",
			len(affinities), cfg.MaxBlocksPerHost)
	}
	mine := map[netip.Prefix]bool{}
	for _, a := range affinities {
		if cidr, err := parseCIDR(a.Spec.CIDR); err == nil {
			mine[cidr] = true
		}
	}
	for range maxAttempts {
		block, err := d.claim(ctx, p.Node, e, mine)
		if err != nil {
			return netip.Addr{}, err
		}
		cidr, err := block.Spec.prefix()
		if err != nil {
			return netip.Addr{}, err
		}
		mine[cidr] = true
		addr, err := d.allocateIn(ctx, p, e, cidr, &block)
		if !errors.Is(err, errNoRoom) {
			return addr, err
		}
	}
	return netip.Addr{}, fmt.Errorf("no block with room after %d claims", maxAttempts)
}

// allocateIn allocates one address of the block cidr for the pod: the
// handle first, then the block by compare-and-swap. block is the block as
// last read (nil: GET it). On a conflict the handle increment is undone
// and the block read again.
func (d *Double) allocateIn(ctx context.Context, p Pod, e env, cidr netip.Prefix, block *ipamBlock) (netip.Addr, error) {
	id := d.HandleID(p)
	for range maxAttempts {
		if block == nil {
			block = &ipamBlock{}
			err := d.conn.get(ctx, blockPath(cidr), block)
			if errors.Is(err, ErrNotFound) {
				return netip.Addr{}, errNoRoom // an affinity left without its block
			}
			if err != nil {
				return netip.Addr{}, err
			}
		}
		sec := secondary{"namespace": p.Namespace, "node": p.Node, "pod": p.Name, "timestamp": time.Now().UTC().String()}
		addr, ok, err := block.Spec.allocate(id, sec, e.isReserved)
		if err != nil {
			return netip.Addr{}, err
		}
		if !ok {
			return netip.Addr{}, errNoRoom
		}
		if err := d.incrementHandle(ctx, id, cidr); err != nil {
			return netip.Addr{}, err
		}
		err = d.conn.update(ctx, blockPath(cidr), block.forWrite(), nil)
		if err == nil {
			return addr, nil
		}
		if undo := d.decrementHandle(ctx, id, cidr, 1); undo != nil {
			return netip.Addr{}, errors.Join(err, undo)
		}
		if !errors.Is(err, ErrConflict) {
			return netip.Addr{}, err
		}
		d.conflicts.Add(1)
		block = nil
	}
	return netip.Addr{}, fmt.Errorf("block %s: still conflicting after %d attempts", cidr, maxAttempts)
}

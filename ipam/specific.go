package ipam

import (
	"context"
	"fmt"
	"net/netip"
)

// AssignIPArgs asks for one specific address.
type AssignIPArgs struct {
	Addr     netip.Addr
	HandleID string
	Attrs    map[string]string
	Node     string
}

// AssignIP allocates a specific address. It must lie in an enabled pool and
// be free; when its block does not exist yet, the node claims it.
func (a *Allocator) AssignIP(ctx context.Context, req AssignIPArgs) (netip.Prefix, error) {
	if req.HandleID == "" || req.Node == "" {
		return netip.Prefix{}, fmt.Errorf("assign %s: handle and node are required", req.Addr)
	}
	attrs := a.attrs(req.Node, req.Attrs)
	for attempt := 0; attempt < maxRetries; attempt++ {
		snap, err := a.readSnapshot(ctx, req.Node, req.HandleID)
		if err != nil {
			return netip.Prefix{}, err
		}
		p, ok := poolFor(snap.pools, req.Addr)
		if !ok || p.disabled {
			return netip.Prefix{}, &NotInPoolError{Addr: req.Addr}
		}
		cidr := p.blockOf(req.Addr)
		blocks, err := a.readBlocks(ctx, []string{cidr.String()})
		if err != nil {
			return netip.Prefix{}, err
		}
		bk := blocks[cidr.String()]
		if bk == nil {
			if bk, err = a.claim(ctx, req.Node, cidr); err != nil {
				return netip.Prefix{}, err
			}
			if bk == nil {
				continue // another node created it: read it again
			}
			blocks[cidr.String()] = bk
		}
		if err := bk.block.assign(cidr, req.Addr, req.HandleID, attrs); err != nil {
			return netip.Prefix{}, err
		}
		bk.dirty = true
		t := newTx(snap, blocks, req.HandleID)
		t.handle.add(bk.block.CIDR, 1)
		w, err := t.write(a)
		if err != nil {
			return netip.Prefix{}, err
		}
		ok, err = a.commit(ctx, w)
		if err != nil {
			return netip.Prefix{}, err
		}
		if ok {
			return netip.PrefixFrom(req.Addr, cidr.Bits()), nil
		}
		backoff(attempt)
	}
	return netip.Prefix{}, fmt.Errorf("assign %s: gave up after %d conflicting attempts", req.Addr, maxRetries)
}

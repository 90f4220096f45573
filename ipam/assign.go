package ipam

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"sort"
	"time"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// AutoAssignArgs asks for addresses of either or both families.
type AutoAssignArgs struct {
	Num4, Num6 int
	HandleID   string            // owner of the addresses: "<network>.<containerID>"
	Attrs      map[string]string // secondary attributes: pod, namespace, ...
	Node       string
	IPv4Pools  []string // names or CIDRs; empty means every eligible pool
	IPv6Pools  []string
	Use        api.IPPoolAllowedUse // default Workload
	// ReuseExisting returns the handle's addresses when it already holds
	// some, writing nothing (a repeated CNI ADD).
	ReuseExisting bool
}

// Assigned are the addresses handed out, each with its block's mask
// (10.65.0.5/26), as Calico's IPAM result carries them.
type Assigned struct {
	IPv4 []netip.Prefix
	IPv6 []netip.Prefix
}

// Addrs returns every address, IPv4 first.
func (as Assigned) Addrs() []netip.Addr {
	var out []netip.Addr
	for _, p := range append(append([]netip.Prefix{}, as.IPv4...), as.IPv6...) {
		out = append(out, p.Addr())
	}
	return out
}

// tx is one attempt: the blocks read or claimed, changes to them and the
// handle, committed together in one compare-and-swap transaction.
type tx struct {
	snap   *snapshot
	blocks map[string]*blockKV
	handle *Handle
	id     string
}

func newTx(snap *snapshot, blocks map[string]*blockKV, id string) *tx {
	h := &Handle{Block: map[string]int{}}
	if snap.handle != nil {
		h.Block = maps.Clone(snap.handle.Block)
	}
	return &tx{snap: snap, blocks: blocks, handle: h, id: id}
}

// write is the handle (Calico writes it first, so that no address is ever
// held by a block without its handle counting it), then the changed blocks.
func (t *tx) write(a *Allocator) (*writeOps, error) {
	blocks := &writeOps{}
	for cidr, bk := range t.blocks {
		if bk.dirty {
			if err := blocks.putBlock(cidr, bk); err != nil {
				return nil, err
			}
		}
	}
	if len(blocks.writes) == 0 {
		return blocks, nil
	}
	w := &writeOps{undo: func(ctx context.Context) error { return a.undoHandle(ctx, t.id, t.handleDelta()) }}
	w.putHandle(t.id, t.handle, t.snap.handleRev)
	w.writes = append(w.writes, blocks.writes...)
	return w, nil
}

// take assigns up to n addresses from one block.
func (t *tx) take(bk *blockKV, n int, attrs map[string]string) ([]netip.Prefix, error) {
	cidr, err := bk.block.Prefix()
	if err != nil {
		return nil, err
	}
	got := bk.block.autoAssign(cidr, n, t.id, attrs)
	if len(got) == 0 {
		return nil, nil
	}
	bk.dirty = true
	t.handle.add(bk.block.CIDR, len(got))
	out := make([]netip.Prefix, len(got))
	for i, a := range got {
		out[i] = netip.PrefixFrom(a, cidr.Bits())
	}
	return out, nil
}

func (a *Allocator) attrs(node string, extra map[string]string) map[string]string {
	m := map[string]string{AttrNode: node, AttrTimestamp: a.now().UTC().String()}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// AutoAssign allocates addresses for a handle on a node. Steady state (a
// free address in one of the node's blocks) costs three etcd round trips:
// one read of pools, config, node, affinities and handle; one read of the
// node's blocks; one transaction writing the blocks and the handle.
func (a *Allocator) AutoAssign(ctx context.Context, req AutoAssignArgs) (Assigned, error) {
	if req.HandleID == "" {
		return Assigned{}, fmt.Errorf("auto-assign: no handle ID")
	}
	if req.Node == "" {
		return Assigned{}, fmt.Errorf("auto-assign: no node name")
	}
	if req.Num4 < 0 || req.Num6 < 0 || req.Num4+req.Num6 == 0 {
		return Assigned{}, fmt.Errorf("auto-assign: asked for %d IPv4 and %d IPv6 addresses", req.Num4, req.Num6)
	}
	if req.Use == "" {
		req.Use = api.IPPoolAllowedUseWorkload
	}
	attrs := a.attrs(req.Node, req.Attrs)
	for attempt := 0; attempt < maxRetries; attempt++ {
		read := a.readSnapshot
		if attempt == 0 {
			read = a.firstSnapshot
		}
		snap, err := read(ctx, req.Node, req.HandleID)
		if err != nil {
			return Assigned{}, err
		}
		if snap.needsLatest() { // recent.go
			ctx = store.LatestReads(ctx)
			continue
		}
		if req.ReuseExisting && snap.handle != nil && !snap.handle.empty() {
			return a.existing(ctx, req.HandleID, snap.handle)
		}
		if snap.deletedHandleRev != "" {
			if err := a.finishHandleDelete(ctx, req.HandleID, snap.deletedHandleRev); err != nil {
				return Assigned{}, err
			}
		}
		if !snap.cfgStored {
			if snap.cfg, err = a.ensureConfig(ctx); err != nil {
				return Assigned{}, err
			}
			snap.cfgStored = true
		}
		var pools4, pools6 []pool
		if req.Num4 > 0 {
			pools4, err = choosePools(snap.pools, true, req.IPv4Pools, req.Node, snap.nodeLabels, req.Use)
		}
		if req.Num6 > 0 && err == nil {
			pools6, err = choosePools(snap.pools, false, req.IPv6Pools, req.Node, snap.nodeLabels, req.Use)
		}
		if err != nil && snap.recent {
			err = errNeedsLatest // no pool is not decided from a recent read
		}
		var blocks map[string]*blockKV
		affine4, affine6 := snap.affineIn(pools4), snap.affineIn(pools6)
		if err == nil {
			blocks, err = a.affineBlocks(ctx, snap, append(append([]string{}, affine4...), affine6...))
		}
		t := newTx(snap, blocks, req.HandleID)
		var out Assigned
		if err == nil {
			out.IPv4, err = a.assignFamily(ctx, t, true, req.Num4, pools4, affine4, req.Node, attrs)
		}
		if err == nil {
			out.IPv6, err = a.assignFamily(ctx, t, false, req.Num6, pools6, affine6, req.Node, attrs)
		}
		if errors.Is(err, errNeedsLatest) { // recent.go
			ctx = store.LatestReads(ctx)
			continue
		}
		if err != nil {
			return Assigned{}, err
		}
		w, err := t.write(a)
		if err != nil {
			return Assigned{}, err
		}
		ok, err := a.commit(ctx, w)
		if err != nil {
			return Assigned{}, err
		}
		if ok {
			a.hints.remember(req.Node, t.blocks)
			return out, nil
		}
		backoff(attempt)
	}
	return Assigned{}, fmt.Errorf("auto-assign for %s: gave up after %d conflicting attempts", req.HandleID, maxRetries)
}

// backoff sleeps a little, growing with the attempt, with jitter so that
// contending writers spread out.
func backoff(attempt int) {
	base := time.Duration(min(attempt+1, 20)) * time.Millisecond
	time.Sleep(base/2 + rand.N(base))
}

// assignFamily takes n addresses of one family: from the node's blocks,
// then from newly claimed blocks, then (unless strict affinity) borrowed
// from other nodes' blocks.
func (a *Allocator) assignFamily(ctx context.Context, t *tx, is4 bool, n int, pools []pool, affine []string, node string, attrs map[string]string) ([]netip.Prefix, error) {
	if n == 0 {
		return nil, nil
	}
	var out []netip.Prefix
	for _, cidr := range affine {
		bk, ok := t.blocks[cidr]
		if !ok || len(out) == n || bk.full() { // a full block gives nothing: left unparsed
			continue
		}
		if err := bk.load(); err != nil {
			return nil, err
		}
		if !bk.block.AffineTo(node) {
			continue
		}
		got, err := t.take(bk, n-len(out), attrs)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	if len(out) < n && t.snap.recent {
		return nil, errNeedsLatest // claim, borrow or refuse: from the latest state only
	}
	cfg := t.snap.cfg
	claimed := 0
	for len(out) < n && cfg.AutoAllocateBlocks &&
		(cfg.MaxBlocksPerHost == 0 || t.snap.blockCount(is4)+claimed < cfg.MaxBlocksPerHost) {
		bk, err := a.claimFree(ctx, node, pools)
		if err != nil {
			return nil, err
		}
		if bk == nil {
			break // every block of the pools is taken
		}
		claimed++
		t.blocks[bk.block.CIDR] = bk
		got, err := t.take(bk, n-len(out), attrs)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	if len(out) < n && !cfg.StrictAffinity {
		got, err := a.borrow(ctx, t, pools, node, n-len(out), attrs)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	if len(out) < n {
		fam := "IPv6"
		if is4 {
			fam = "IPv4"
		}
		names := make([]string, len(pools))
		for i, p := range pools {
			names[i] = fmt.Sprintf("%s (%s)", p.name, p.prefix)
		}
		return nil, fmt.Errorf("%w: could not allocate %d %s address(es) for node %q from pools %v (strictAffinity=%v, maxBlocksPerHost=%d)",
			ErrExhausted, n, fam, node, names, cfg.StrictAffinity, cfg.MaxBlocksPerHost)
	}
	return out, nil
}

// borrow takes addresses from blocks not affine to this node.
func (a *Allocator) borrow(ctx context.Context, t *tx, pools []pool, node string, n int, attrs map[string]string) ([]netip.Prefix, error) {
	fam := "ipv6"
	if len(pools) > 0 && pools[0].prefix.Addr().Is4() {
		fam = "ipv4"
	}
	kvs, err := a.list(ctx, blocksOf(fam))
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, kv := range kvs {
		if len(out) == n {
			break
		}
		b, err := parseBlock(kv)
		if err != nil {
			return nil, err
		}
		if _, seen := t.blocks[b.CIDR]; seen || b.Free() == 0 || b.AffineTo(node) {
			continue
		}
		p, err := b.Prefix()
		if err != nil {
			continue
		}
		if !inPools(pools, p) {
			continue
		}
		bk := &blockKV{block: b, rev: kv.Revision}
		t.blocks[b.CIDR] = bk
		got, err := t.take(bk, n-len(out), attrs)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

func inPools(pools []pool, block netip.Prefix) bool {
	for _, p := range pools {
		if p.prefix.Contains(block.Addr()) {
			return true
		}
	}
	return false
}

// existing returns the addresses a handle holds, with their block masks.
func (a *Allocator) existing(ctx context.Context, id string, h *Handle) (Assigned, error) {
	cidrs := make([]string, 0, len(h.Block))
	for c := range h.Block {
		cidrs = append(cidrs, c)
	}
	sort.Strings(cidrs)
	blocks, err := a.readBlocks(ctx, cidrs)
	if err != nil {
		return Assigned{}, err
	}
	var out Assigned
	for _, c := range cidrs {
		bk, ok := blocks[c]
		if !ok {
			continue
		}
		p, err := bk.block.Prefix()
		if err != nil {
			return Assigned{}, err
		}
		for _, ord := range bk.block.handleOrdinals(id) {
			addr := netip.PrefixFrom(ordinalAddr(p, ord), p.Bits())
			if addr.Addr().Is4() {
				out.IPv4 = append(out.IPv4, addr)
			} else {
				out.IPv6 = append(out.IPv6, addr)
			}
		}
	}
	return out, nil
}

package ipam

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/calico-aio/calico-aio/store"
)

// IPsByHandle lists the addresses a handle holds.
func (a *Allocator) IPsByHandle(ctx context.Context, handleID string) ([]netip.Addr, error) {
	hkv, err := a.get(ctx, store.HandleKey(handleID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h, err := parseHandle(handleID, hkv.Value)
	if err != nil {
		return nil, err
	}
	cidrs := make([]string, 0, len(h.Block))
	for c := range h.Block {
		cidrs = append(cidrs, c)
	}
	sort.Strings(cidrs)
	blocks, err := a.readBlocks(ctx, cidrs)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, c := range cidrs {
		bk, ok := blocks[c]
		if !ok {
			continue
		}
		p, _ := bk.block.Prefix()
		for _, ord := range bk.block.handleOrdinals(handleID) {
			out = append(out, ordinalAddr(p, ord))
		}
	}
	return out, nil
}

// BlockInfo is a stored block with its prefix and revision.
type BlockInfo struct {
	Prefix   netip.Prefix
	Block    *Block
	Revision int64
}

// Allocation is one allocated address of a block.
type Allocation struct {
	Addr           netip.Addr
	Handle         string
	Attrs          map[string]string
	SequenceNumber uint64
}

// Allocations lists the allocated addresses of a block.
func (bi BlockInfo) Allocations() []Allocation {
	var out []Allocation
	for ord := range bi.Block.Allocations {
		at, ok := bi.Block.attrsOf(ord)
		if !ok {
			continue
		}
		al := Allocation{Addr: ordinalAddr(bi.Prefix, ord), Attrs: at.Secondary,
			SequenceNumber: bi.Block.SequenceNumberForAllocation[strconv.Itoa(ord)]}
		if at.HandleID != nil {
			al.Handle = *at.HandleID
		}
		out = append(out, al)
	}
	return out
}

// ListBlocks reads every block of both families.
func (a *Allocator) ListBlocks(ctx context.Context) ([]BlockInfo, error) {
	kvs, err := a.list(ctx, store.BlockPrefix)
	if err != nil {
		return nil, err
	}
	out := make([]BlockInfo, 0, len(kvs))
	for _, kv := range kvs {
		b, err := parseBlock(kv)
		if err != nil {
			return nil, err
		}
		p, err := b.Prefix()
		if err != nil {
			return nil, err
		}
		out = append(out, BlockInfo{Prefix: p, Block: b, Revision: kv.Revision})
	}
	return out, nil
}

// HandleInfo is a stored handle.
type HandleInfo struct {
	ID       string
	Handle   *Handle
	Revision int64
}

// ListHandles reads every handle.
func (a *Allocator) ListHandles(ctx context.Context) ([]HandleInfo, error) {
	kvs, err := a.list(ctx, store.HandlePrefix)
	if err != nil {
		return nil, err
	}
	out := make([]HandleInfo, 0, len(kvs))
	for _, kv := range kvs {
		id := strings.TrimPrefix(kv.Key, store.HandlePrefix)
		h, err := parseHandle(id, kv.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, HandleInfo{ID: id, Handle: h, Revision: kv.Revision})
	}
	return out, nil
}

// AffinityInfo is one stored block affinity.
type AffinityInfo struct {
	Node     string
	CIDR     netip.Prefix
	State    string
	Key      string
	Revision int64
}

// ListAffinities reads every node's block affinities.
func (a *Allocator) ListAffinities(ctx context.Context) ([]AffinityInfo, error) {
	kvs, err := a.list(ctx, store.HostPrefix)
	if err != nil {
		return nil, err
	}
	var out []AffinityInfo
	for _, kv := range kvs {
		// /calico/ipam/v2/host/<node>/<fam>/block/<cidr>
		parts := strings.Split(strings.TrimPrefix(kv.Key, store.HostPrefix), "/")
		if len(parts) != 4 {
			continue
		}
		cidr, err := store.ParseCIDRSegment(parts[3])
		if err != nil {
			continue
		}
		var v affinityValue
		_ = json.Unmarshal(kv.Value, &v)
		out = append(out, AffinityInfo{Node: parts[0], CIDR: cidr, State: v.State, Key: kv.Key, Revision: kv.Revision})
	}
	return out, nil
}

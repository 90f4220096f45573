package ipam

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"strconv"
	"strings"

	"github.com/calico-aio/calico-aio/store/api"

	"github.com/calico-aio/calico-aio/store"
)

// IPsByHandle lists the addresses a handle holds.
func (a *Allocator) IPsByHandle(ctx context.Context, handleID string) ([]netip.Addr, error) {
	h, _, err := a.readHandle(ctx, handleID)
	if err != nil || h == nil {
		return nil, err
	}
	as, err := a.existing(ctx, handleID, h)
	if err != nil {
		return nil, err
	}
	return as.Addrs(), nil
}

// readHandle reads a handle; (nil, "", nil) when it does not exist or is
// marked deleted, whose delete it then finishes, as Calico's reader does.
func (a *Allocator) readHandle(ctx context.Context, id string) (*Handle, store.Revision, error) {
	h, rev, err := a.readStoredHandle(ctx, id)
	if err != nil || h == nil {
		return nil, "", err
	}
	if h.Deleted {
		return nil, "", a.finishHandleDelete(ctx, id, rev)
	}
	return h, rev, nil
}

// readStoredHandle reads a handle, also one marked deleted; (nil, "", nil)
// when it does not exist.
func (a *Allocator) readStoredHandle(ctx context.Context, id string) (*Handle, store.Revision, error) {
	hkv, err := a.get(ctx, handleKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	h, err := parseHandle(id, hkv.Value)
	return h, hkv.Revision, err
}

// BlockInfo is a stored block with its prefix and revision.
type BlockInfo struct {
	Prefix   netip.Prefix
	Block    *Block
	Revision store.Revision
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
	kvs, err := a.list(ctx, store.ListOptions{Kind: store.KindIPAMBlock})
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
	Revision store.Revision
}

// ListHandles reads every handle.
func (a *Allocator) ListHandles(ctx context.Context) ([]HandleInfo, error) {
	kvs, err := a.list(ctx, store.ListOptions{Kind: store.KindIPAMHandle})
	if err != nil {
		return nil, err
	}
	out := make([]HandleInfo, 0, len(kvs))
	for _, kv := range kvs {
		id := kv.Key.Name
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
	Key      store.Key
	Revision store.Revision
}

// ListAffinities reads every node's block affinities.
func (a *Allocator) ListAffinities(ctx context.Context) ([]AffinityInfo, error) {
	kvs, err := a.list(ctx, store.ListOptions{Kind: store.KindBlockAffinity})
	if err != nil {
		return nil, err
	}
	var out []AffinityInfo
	for _, kv := range kvs {
		cidr, err := netip.ParsePrefix(kv.Key.Name)
		if err != nil {
			continue
		}
		var v affinityValue
		_ = json.Unmarshal(kv.Value, &v)
		out = append(out, AffinityInfo{Node: kv.Key.Node, CIDR: cidr, State: v.State, Key: kv.Key, Revision: kv.Revision})
	}
	return out, nil
}

// CanServe reports whether some pool can serve node for the wanted
// families (the datastore error, if any, is returned as such).
func (a *Allocator) CanServe(ctx context.Context, node string, want4, want6 bool, pools4, pools6 []string) (bool, error) {
	snap, err := a.readSnapshot(ctx, node, "")
	if err != nil {
		return false, err
	}
	if want4 {
		if _, err := choosePools(snap.pools, true, pools4, node, snap.nodeLabels, api.IPPoolAllowedUseWorkload); err != nil {
			return false, nil
		}
	}
	if want6 {
		if _, err := choosePools(snap.pools, false, pools6, node, snap.nodeLabels, api.IPPoolAllowedUseWorkload); err != nil {
			return false, nil
		}
	}
	return true, nil
}

// HandlesOnNode lists the handles with the given prefix that hold
// addresses allocated by node.
func (a *Allocator) HandlesOnNode(ctx context.Context, node, prefix string) ([]string, error) {
	blocks, err := a.ListBlocks(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, b := range blocks {
		for _, al := range b.Allocations() {
			if al.Attrs[AttrNode] == node && strings.HasPrefix(al.Handle, prefix) && !seen[al.Handle] {
				seen[al.Handle] = true
				out = append(out, al.Handle)
			}
		}
	}
	return out, nil
}

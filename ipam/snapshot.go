package ipam

import (
	"context"
	"encoding/json"
	"net/netip"
	"sort"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// Affinity states as Calico stores them.
const (
	AffinityPending         = "pending"
	AffinityConfirmed       = "confirmed"
	AffinityPendingDeletion = "pendingDeletion"
)

// affinityValue is /calico/ipam/v2/host/<node>/<fam>/block/<cidr>.
type affinityValue struct {
	State   string `json:"state"`
	Deleted bool   `json:"deleted"`
}

type affinity struct {
	cidr  netip.Prefix
	state string
	rev   store.Revision
}

// snapshot is everything the hot path needs, read in one transaction.
type snapshot struct {
	pools      []pool
	cfg        Config
	cfgStored  bool // false: no config is stored, cfg is the default
	nodeLabels map[string]string
	affinities []affinity // this node's, sorted by CIDR
	handle     *Handle    // nil when absent
	handleRev  store.Revision
	// deletedHandleRev is the revision of the handle when it is stored
	// marked deleted ("" otherwise).
	deletedHandleRev store.Revision
	// hinted are the blocks read with the snapshot (hints.go), by CIDR.
	hinted map[string]*blockKV
	// recent: read under store.RecentReads, so possibly a little old
	// (prefetch.go).
	recent bool
	// mark is the hints' count of block writes when the read began
	// (BlockHints.mark).
	mark uint64
}

// readSnapshot reads the pools, the IPAM config, the node, the node's block
// affinities and the handle in a single round trip; with them, the blocks
// hinted for the node.
func (a *Allocator) readSnapshot(ctx context.Context, node, handleID string) (*snapshot, error) {
	reads := []store.Read{{List: &store.ListOptions{Kind: "IPPool"}}, {Key: ipamConfigKey}}
	if node != "" {
		reads = append(reads,
			store.Read{Key: store.Key{Kind: "Node", Name: node}},
			store.Read{List: &store.ListOptions{Kind: store.KindBlockAffinity, Node: node}})
	}
	if handleID != "" {
		reads = append(reads, store.Read{Key: handleKey(handleID)})
	}
	fixed := len(reads)
	mark := a.hints.mark()
	if node != "" {
		for _, c := range a.hints.get(node) {
			if k, err := blockKeyOf(c); err == nil {
				reads = append(reads, store.Read{Key: k})
			}
		}
	}
	resp, err := a.readMany(ctx, reads)
	if err != nil {
		return nil, err
	}
	hinted, err := lazyBlocks(resp[fixed:])
	if err != nil {
		return nil, err
	}
	resp = resp[:fixed]
	s := &snapshot{cfg: DefaultConfig(), nodeLabels: map[string]string{}, hinted: hinted, recent: store.ReadsRecent(ctx), mark: mark}
	var pools []*api.IPPool
	for _, o := range resp[0] {
		r, err := store.DecodeObject(o)
		if err != nil {
			return nil, err
		}
		pools = append(pools, r.(*api.IPPool))
	}
	s.pools = toPools(pools)
	for _, o := range resp[1] {
		if s.cfg, err = parseConfig(o.Value); err != nil {
			return nil, err
		}
		s.cfgStored = true
	}
	if node != "" {
		s.readNode(resp[2], resp[3])
	}
	if handleID != "" {
		for _, o := range resp[len(resp)-1] {
			h, err := parseHandle(handleID, o.Value)
			if err != nil {
				return nil, err
			}
			if h.Deleted { // being deleted: absent, its delete to finish
				s.deletedHandleRev = o.Revision
				continue
			}
			s.handle, s.handleRev = h, o.Revision
		}
	}
	return s, nil
}

// readNode takes the node's labels and its block affinities, sorted by
// CIDR.
func (s *snapshot) readNode(nodes, affinities []store.Object) {
	for _, o := range nodes {
		if r, err := store.DecodeObject(o); err == nil {
			for k, v := range r.GetObjectMeta().Labels {
				s.nodeLabels[k] = v
			}
		}
	}
	for _, o := range affinities {
		cidr, err := netip.ParsePrefix(o.Key.Name)
		if err != nil {
			continue
		}
		var v affinityValue
		_ = json.Unmarshal(o.Value, &v)
		s.affinities = append(s.affinities, affinity{cidr: cidr, state: v.State, rev: o.Revision})
	}
	sort.Slice(s.affinities, func(i, j int) bool { return s.affinities[i].cidr.String() < s.affinities[j].cidr.String() })
}

// affineIn returns this node's confirmed (or pending) blocks inside pools.
func (s *snapshot) affineIn(pools []pool) []string {
	var out []string
	for _, af := range s.affinities {
		if af.state == AffinityPendingDeletion {
			continue
		}
		for _, p := range pools {
			if p.prefix.Contains(af.cidr.Addr()) && af.cidr.Bits() == p.blockBits {
				out = append(out, af.cidr.String())
				break
			}
		}
	}
	return out
}

// blockCount is how many blocks the node holds in a family.
func (s *snapshot) blockCount(is4 bool) int {
	n := 0
	for _, af := range s.affinities {
		if af.cidr.Addr().Is4() == is4 {
			n++
		}
	}
	return n
}

package ipam

import (
	"context"
	"encoding/json"
	"net/netip"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

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
	rev   int64
}

// snapshot is everything the hot path needs, read in one transaction.
type snapshot struct {
	pools      []pool
	cfg        Config
	nodeLabels map[string]string
	affinities []affinity // this node's, sorted by CIDR
	handle     *Handle    // nil when absent
	handleRev  int64
}

// readSnapshot reads the pools, the IPAM config, the node, the node's block
// affinities and the handle in a single etcd round trip.
func (a *Allocator) readSnapshot(ctx context.Context, node, handleID string) (*snapshot, error) {
	poolKind, _ := api.LookupKind("IPPool")
	nodeKind, _ := api.LookupKind("Node")
	ops := []clientv3.Op{
		clientv3.OpGet(store.ResourceListPrefix(poolKind, ""), clientv3.WithPrefix()),
		clientv3.OpGet(store.IPAMConfigKey),
		clientv3.OpGet(store.ResourceKey(nodeKind, "", node)),
		clientv3.OpGet(store.HostAffinityPrefix(node, ""), clientv3.WithPrefix()),
	}
	if handleID != "" {
		ops = append(ops, clientv3.OpGet(store.HandleKey(handleID)))
	}
	resp, err := a.txn(ctx, nil, ops, nil)
	if err != nil {
		return nil, err
	}
	s := &snapshot{cfg: DefaultConfig(), nodeLabels: map[string]string{}}
	var pools []*api.IPPool
	for _, kv := range kvsOf(resp, 0) {
		r, err := store.DecodeKV(kv)
		if err != nil {
			return nil, err
		}
		pools = append(pools, r.(*api.IPPool))
	}
	s.pools = toPools(pools)
	for _, kv := range kvsOf(resp, 1) {
		if s.cfg, err = parseConfig(kv.Value); err != nil {
			return nil, err
		}
	}
	for _, kv := range kvsOf(resp, 2) {
		if r, err := store.DecodeKV(kv); err == nil {
			for k, v := range r.GetObjectMeta().Labels {
				s.nodeLabels[k] = v
			}
		}
	}
	for _, kv := range kvsOf(resp, 3) {
		seg := kv.Key[strings.LastIndexByte(kv.Key, '/')+1:]
		cidr, err := store.ParseCIDRSegment(seg)
		if err != nil {
			continue
		}
		var v affinityValue
		_ = json.Unmarshal(kv.Value, &v)
		s.affinities = append(s.affinities, affinity{cidr: cidr, state: v.State, rev: kv.Revision})
	}
	sort.Slice(s.affinities, func(i, j int) bool { return s.affinities[i].cidr.String() < s.affinities[j].cidr.String() })
	if handleID != "" {
		for _, kv := range kvsOf(resp, 4) {
			if s.handle, err = parseHandle(handleID, kv.Value); err != nil {
				return nil, err
			}
			s.handleRev = kv.Revision
		}
	}
	return s, nil
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

// Package ipam is the block allocator: IP pools carved into blocks with
// per-node affinity, stored exactly in Calico's etcd layout, every write a
// compare-and-swap.
package ipam

import (
	"fmt"
	"github.com/calico-aio/calico-aio/store"
	"math/big"
	"net/netip"
	"sort"
	"strconv"
)

// Block is an allocation block as Calico stores it under
// /calico/ipam/v2/assignment/<family>/block/<cidr>.
type Block struct {
	CIDR              string  `json:"cidr"`
	Affinity          *string `json:"affinity"`
	AffinityClaimTime string  `json:"affinity_claim_time,omitempty"`
	// Allocations has one entry per address: an index into Attributes, or
	// nil when the address is free.
	Allocations []*int `json:"allocations"`
	// Unallocated is the FIFO of free ordinals.
	Unallocated                 []int                  `json:"unallocated"`
	Attributes                  []AllocationAttributes `json:"attributes"`
	SequenceNumber              uint64                 `json:"sequenceNumber"`
	SequenceNumberForAllocation map[string]uint64      `json:"sequenceNumberForAllocation"`
	Deleted                     bool                   `json:"deleted"`
}

// AllocationAttributes say who holds an address.
type AllocationAttributes struct {
	HandleID  *string           `json:"handle_id"`
	Secondary map[string]string `json:"secondary"`
}

// Attribute keys Calico uses in "secondary".
const (
	AttrNode      = "node"
	AttrPod       = "pod"
	AttrNamespace = "namespace"
	AttrTimestamp = "timestamp"
	AttrType      = "type"
)

// hostAffinity is the affinity string of a node.
func hostAffinity(node string) string { return "host:" + node }

// newBlock makes an empty block; affinity may be "".
func newBlock(cidr netip.Prefix, node string, now string) *Block {
	n := blockSize(cidr)
	b := &Block{
		CIDR:                        cidr.String(),
		Allocations:                 make([]*int, n),
		Unallocated:                 make([]int, n),
		Attributes:                  []AllocationAttributes{},
		SequenceNumberForAllocation: map[string]uint64{},
	}
	for i := range b.Unallocated {
		b.Unallocated[i] = i
	}
	if node != "" {
		a := hostAffinity(node)
		b.Affinity = &a
		b.AffinityClaimTime = now
	}
	return b
}

func blockSize(cidr netip.Prefix) int {
	return 1 << (cidr.Addr().BitLen() - cidr.Bits())
}

// Prefix parses the block's CIDR.
func (b *Block) Prefix() (netip.Prefix, error) {
	p, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return p, fmt.Errorf("block cidr %q: %w", b.CIDR, err)
	}
	return p, nil
}

// AffineTo reports whether the block belongs to node.
func (b *Block) AffineTo(node string) bool {
	return b.Affinity != nil && *b.Affinity == hostAffinity(node)
}

// Host is the node of the block's affinity ("" when none).
func (b *Block) Host() string {
	if b.Affinity == nil || len(*b.Affinity) < 5 || (*b.Affinity)[:5] != "host:" {
		return ""
	}
	return (*b.Affinity)[5:]
}

// Free is the number of free addresses.
func (b *Block) Free() int { return len(b.Unallocated) }

// InUse is the number of allocated addresses.
func (b *Block) InUse() int { return len(b.Allocations) - len(b.Unallocated) }

// ordinalAddr is the address at ordinal i.
func ordinalAddr(cidr netip.Prefix, i int) netip.Addr {
	base := new(big.Int).SetBytes(cidr.Addr().AsSlice())
	base.Add(base, big.NewInt(int64(i)))
	buf := base.FillBytes(make([]byte, cidr.Addr().BitLen()/8))
	a, _ := netip.AddrFromSlice(buf)
	return a
}

// addrOrdinal is the ordinal of a in cidr, or -1 when outside.
func addrOrdinal(cidr netip.Prefix, a netip.Addr) int {
	if !cidr.Contains(a) {
		return -1
	}
	x := new(big.Int).SetBytes(a.AsSlice())
	x.Sub(x, new(big.Int).SetBytes(cidr.Addr().AsSlice()))
	return int(x.Int64())
}

// attributeIndex returns the index of an attribute equal to attr, adding it.
func (b *Block) attributeIndex(handle string, attrs map[string]string) int {
	h := handle
	b.Attributes = append(b.Attributes, AllocationAttributes{HandleID: &h, Secondary: attrs})
	return len(b.Attributes) - 1
}

func (b *Block) take(ord int, attrIdx int) {
	idx := attrIdx
	b.Allocations[ord] = &idx
	b.SequenceNumberForAllocation[strconv.Itoa(ord)] = b.SequenceNumber
	b.SequenceNumber++
}

// autoAssign allocates up to num addresses from the front of the free list.
func (b *Block) autoAssign(cidr netip.Prefix, num int, handle string, attrs map[string]string) []netip.Addr {
	if num > len(b.Unallocated) {
		num = len(b.Unallocated)
	}
	if num == 0 {
		return nil
	}
	idx := b.attributeIndex(handle, attrs)
	out := make([]netip.Addr, 0, num)
	for _, ord := range b.Unallocated[:num] {
		b.take(ord, idx)
		out = append(out, ordinalAddr(cidr, ord))
	}
	b.Unallocated = b.Unallocated[num:]
	return out
}

// assign allocates one specific address; it fails when it is taken.
func (b *Block) assign(cidr netip.Prefix, a netip.Addr, handle string, attrs map[string]string) error {
	ord := addrOrdinal(cidr, a)
	if ord < 0 {
		return fmt.Errorf("address %s is not in block %s", a, b.CIDR)
	}
	if b.Allocations[ord] != nil {
		return &InUseError{Addr: a, Handle: b.handleOf(ord)}
	}
	for i, u := range b.Unallocated {
		if u == ord {
			b.Unallocated = append(b.Unallocated[:i], b.Unallocated[i+1:]...)
			break
		}
	}
	b.take(ord, b.attributeIndex(handle, attrs))
	return nil
}

func (b *Block) handleOf(ord int) string {
	if ord < 0 || ord >= len(b.Allocations) || b.Allocations[ord] == nil {
		return ""
	}
	i := *b.Allocations[ord]
	if i < 0 || i >= len(b.Attributes) || b.Attributes[i].HandleID == nil {
		return ""
	}
	return *b.Attributes[i].HandleID
}

// attrsOf returns the attributes of an allocated ordinal.
func (b *Block) attrsOf(ord int) (AllocationAttributes, bool) {
	if ord < 0 || ord >= len(b.Allocations) || b.Allocations[ord] == nil {
		return AllocationAttributes{}, false
	}
	i := *b.Allocations[ord]
	if i < 0 || i >= len(b.Attributes) {
		return AllocationAttributes{}, false
	}
	return b.Attributes[i], true
}

// release frees the ordinals for which keep(ord) is false... rather: for
// which match(ord) is true. It returns the freed ordinals.
func (b *Block) release(match func(ord int) bool) []int {
	var freed []int
	for ord, a := range b.Allocations {
		if a != nil && match(ord) {
			b.Allocations[ord] = nil
			delete(b.SequenceNumberForAllocation, strconv.Itoa(ord))
			b.Unallocated = append(b.Unallocated, ord)
			freed = append(freed, ord)
		}
	}
	if len(freed) > 0 {
		b.compactAttributes()
		b.SequenceNumber++
	}
	return freed
}

// compactAttributes drops attributes no allocation refers to and renumbers.
func (b *Block) compactAttributes() {
	used := map[int]int{}
	var order []int
	for _, a := range b.Allocations {
		if a != nil {
			if _, ok := used[*a]; !ok {
				used[*a] = 0
				order = append(order, *a)
			}
		}
	}
	sort.Ints(order)
	attrs := make([]AllocationAttributes, 0, len(order))
	for newIdx, old := range order {
		used[old] = newIdx
		attrs = append(attrs, b.Attributes[old])
	}
	for i, a := range b.Allocations {
		if a != nil {
			n := used[*a]
			b.Allocations[i] = &n
		}
	}
	b.Attributes = attrs
}

// handleOrdinals lists the ordinals held by handle.
func (b *Block) handleOrdinals(handle string) []int {
	var out []int
	for ord := range b.Allocations {
		if b.handleOf(ord) == handle {
			out = append(out, ord)
		}
	}
	return out
}

// ParseBlock decodes a stored block value.
func ParseBlock(val []byte) (*Block, error) {
	return parseBlock(store.Object{Key: store.Key{Kind: store.KindIPAMBlock}, Value: val})
}

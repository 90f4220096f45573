package ipam

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/selector"
)

// pool is an IP pool reduced to what allocation needs.
type pool struct {
	name      string
	prefix    netip.Prefix
	blockBits int
	disabled  bool
	spec      *api.IPPool
}

func toPools(objs []*api.IPPool) []pool {
	out := make([]pool, 0, len(objs))
	for _, p := range objs {
		p.Default()
		pr, err := p.Prefix()
		if err != nil {
			continue
		}
		out = append(out, pool{name: p.Metadata.Name, prefix: pr, blockBits: p.Spec.BlockSize, disabled: p.Spec.Disabled, spec: p})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].prefix.String() < out[j].prefix.String() })
	return out
}

// blockOf is the CIDR of the block holding addr.
func (p pool) blockOf(addr netip.Addr) netip.Prefix {
	b, _ := addr.Prefix(p.blockBits)
	return b
}

func (p pool) allows(use api.IPPoolAllowedUse) bool {
	return len(p.spec.Spec.AllowedUses) == 0 || slices.Contains(p.spec.Spec.AllowedUses, use)
}

func (p pool) selects(nodeLabels map[string]string) bool {
	s, err := selector.Parse(p.spec.Spec.NodeSelector)
	return err == nil && s.Evaluate(nodeLabels)
}

// poolFor finds the pool containing addr.
func poolFor(pools []pool, addr netip.Addr) (pool, bool) {
	for _, p := range pools {
		if p.prefix.Contains(addr) {
			return p, true
		}
	}
	return pool{}, false
}

// choosePools picks the pools of one family (4 or 6) an allocation may use.
// Requested pools (names or CIDRs) must exist, be enabled and select the
// node; without a request every enabled, automatic pool that selects the
// node and allows the use is a candidate.
func choosePools(all []pool, is4 bool, requested []string, node string, nodeLabels map[string]string, use api.IPPoolAllowedUse) ([]pool, error) {
	fam := "IPv6"
	if is4 {
		fam = "IPv4"
	}
	var out []pool
	if len(requested) > 0 {
		for _, r := range requested {
			p, ok := findPool(all, r)
			if !ok {
				return nil, fmt.Errorf("%w: requested %s pool %q does not exist", ErrNoPool, fam, r)
			}
			switch {
			case p.prefix.Addr().Is4() != is4:
				return nil, fmt.Errorf("%w: requested %s pool %q (%s) is not an %s pool", ErrNoPool, fam, r, p.prefix, fam)
			case p.disabled:
				return nil, fmt.Errorf("%w: requested %s pool %q (%s) is disabled", ErrNoPool, fam, r, p.prefix)
			case !p.selects(nodeLabels):
				return nil, fmt.Errorf("%w: requested %s pool %q (%s) does not select node %q (nodeSelector %q)", ErrNoPool, fam, r, p.prefix, node, p.spec.Spec.NodeSelector)
			case !p.allows(use):
				return nil, fmt.Errorf("%w: requested %s pool %q (%s) does not allow use %s", ErrNoPool, fam, r, p.prefix, use)
			}
			out = append(out, p)
		}
		return out, nil
	}
	for _, p := range all {
		if p.prefix.Addr().Is4() != is4 || p.disabled || !p.allows(use) || !p.selects(nodeLabels) ||
			p.spec.Spec.AssignmentMode == api.AssignmentModeManual {
			continue
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no enabled %s pool selects node %q", ErrNoPool, fam, node)
	}
	return out, nil
}

func findPool(all []pool, nameOrCIDR string) (pool, bool) {
	want, cidrErr := netip.ParsePrefix(nameOrCIDR)
	for _, p := range all {
		if p.name == nameOrCIDR || (cidrErr == nil && want.Masked() == p.prefix) {
			return p, true
		}
	}
	return pool{}, false
}

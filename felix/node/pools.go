package node

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// Default pools (docs/BOOTSTRAP.md): config.ParseDefaultPools reads them
// from the CALICO_IPV4POOL_* and CALICO_IPV6POOL_* variables.

// EnsureDefaultPools creates each of want whose family has no pool yet. A
// pool another node created meanwhile counts as present; no existing pool
// is ever changed.
func EnsureDefaultPools(ctx context.Context, c *store.Client, want []*api.IPPool) error {
	if len(want) == 0 {
		return nil
	}
	k, _ := api.LookupKind("IPPool")
	present := func() (v4, v6 bool, err error) {
		objs, _, err := c.ListResources(ctx, k, "")
		if err != nil {
			return false, false, fmt.Errorf("listing IP pools: %w", err)
		}
		for _, o := range objs {
			if pfx, err := o.(*api.IPPool).Prefix(); err == nil {
				v4, v6 = v4 || pfx.Addr().Is4(), v6 || pfx.Addr().Is6()
			}
		}
		return v4, v6, nil
	}
	v4, v6, err := present()
	if err != nil {
		return err
	}
	for _, p := range want {
		pfx, _ := p.Prefix()
		if has := map[bool]bool{false: v4, true: v6}[pfx.Addr().Is6()]; has {
			slog.Info("an IP pool of this family exists; not creating the default", "pool", p.Metadata.Name, "cidr", p.Spec.CIDR)
			continue
		}
		obj := *p
		obj.Spec.AllowedUses = append([]api.IPPoolAllowedUse(nil), p.Spec.AllowedUses...)
		_, err := c.CreateResource(ctx, &obj)
		if err == nil {
			slog.Info("created default IP pool", "pool", p.Metadata.Name, "cidr", p.Spec.CIDR, "blockSize", p.Spec.BlockSize,
				"ipipMode", p.Spec.IPIPMode, "vxlanMode", p.Spec.VXLANMode, "natOutgoing", p.Spec.NATOutgoing, "nodeSelector", p.Spec.NodeSelector)
			continue
		}
		// Another node may have created a pool of this family meanwhile
		// (the same default, or one that now overlaps ours).
		if v4, v6, perr := present(); perr == nil && map[bool]bool{false: v4, true: v6}[pfx.Addr().Is6()] {
			continue
		}
		return fmt.Errorf("creating default IP pool %s (%s): %w", p.Metadata.Name, p.Spec.CIDR, err)
	}
	return nil
}

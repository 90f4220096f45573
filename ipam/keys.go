package ipam

import (
	"fmt"
	"net/netip"

	"github.com/calico-aio/calico-aio/store"
)

func blockKeyOf(cidr string) (string, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", fmt.Errorf("block cidr %q: %w", cidr, err)
	}
	return store.BlockKey(p), nil
}

func familyOf(a netip.Addr) string {
	if a.Is4() {
		return "ipv4"
	}
	return "ipv6"
}

// blockFamilyPrefix lists the blocks of one family.
func blockFamilyPrefix(fam string) string { return store.BlockPrefix + fam + "/block/" }

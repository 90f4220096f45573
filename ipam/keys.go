package ipam

import (
	"fmt"
	"net/netip"

	"github.com/calico-aio/calico-aio/store"
)

func blockKeyOf(cidr string) (store.Key, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return store.Key{}, fmt.Errorf("block cidr %q: %w", cidr, err)
	}
	return blockKey(p), nil
}

func blockKey(p netip.Prefix) store.Key {
	return store.Key{Kind: store.KindIPAMBlock, Name: p.String()}
}

func handleKey(id string) store.Key { return store.Key{Kind: store.KindIPAMHandle, Name: id} }

func affinityKey(node string, p netip.Prefix) store.Key {
	return store.Key{Kind: store.KindBlockAffinity, Node: node, Name: p.String()}
}

var ipamConfigKey = store.Key{Kind: store.KindIPAMConfig, Name: "default"}

func familyOf(a netip.Addr) string {
	if a.Is4() {
		return "ipv4"
	}
	return "ipv6"
}

// familyNumber is 4 or 6 for "ipv4" or "ipv6".
func familyNumber(fam string) int {
	if fam == "ipv4" {
		return 4
	}
	return 6
}

// blocksOf selects the blocks of one family ("ipv4"/"ipv6").
func blocksOf(fam string) store.ListOptions {
	return store.ListOptions{Kind: store.KindIPAMBlock, Family: familyNumber(fam)}
}

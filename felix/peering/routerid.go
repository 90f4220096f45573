package peering

import (
	"crypto/sha256"
	"fmt"
	"net/netip"
)

// routerIDHash is CALICO_ROUTER_ID's value that derives the router ID from
// the node name.
const routerIDHash = "hash"

// RouterID is the speaker's router ID: the node's IPv4 address when
// CALICO_ROUTER_ID is empty, the given IPv4 address, or with "hash" one
// derived from the node name as Calico derives it (for IPv6-only nodes):
// the first four bytes of the SHA-256 of the name, the first byte lowered
// by 32 when above 223 (no multicast or reserved first octet).
func RouterID(setting, nodeName string, nodeIPv4 netip.Addr) (netip.Addr, error) {
	switch setting {
	case "":
		return nodeIPv4, nil
	case routerIDHash:
		sum := sha256.Sum256([]byte(nodeName))
		if sum[0] > 223 {
			sum[0] -= 32
		}
		return netip.AddrFrom4([4]byte(sum[:4])), nil
	}
	a, err := netip.ParseAddr(setting)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("CALICO_ROUTER_ID=%q: want an IPv4 address or %q", setting, routerIDHash)
	}
	return a, nil
}

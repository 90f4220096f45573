package kdd

import (
	"crypto/sha3"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
)

// IPAMConfigName is the name of the one IPAMConfig.
const IPAMConfigName = "default"

// BlockName is an IPAMBlock's name: its CIDR with '.', ':' and '/' as '-'
// (10.244.166.128/26 is 10-244-166-128-26).
func BlockName(cidr netip.Prefix) string {
	return strings.NewReplacer(".", "-", ":", "-", "/", "-").Replace(cidr.Masked().String())
}

// AffinityName is a BlockAffinity's name: <node>-<block name>.
func AffinityName(node string, cidr netip.Prefix) string {
	return node + "-" + BlockName(cidr)
}

// HandleName is an IPAMHandle's name: the handle ID in lower case (the ID
// itself is kept in spec.handleID).
func HandleName(handleID string) string { return strings.ToLower(handleID) }

// HostnameHash is the projectcalico.org/hostname-hash label of a node's
// block affinities: base32 (no padding) of the SHA3-256 of the node name.
func HostnameHash(node string) string {
	sum := sha3.Sum256([]byte(node))
	return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:])
}

// ReverseUID converts between a custom resource's uid and the v3 object's:
// every byte's bits are reversed except the version (byte 6) and variant
// (byte 8) bytes. It is its own inverse. An empty uid stays empty.
func ReverseUID(uid string) (string, error) {
	if uid == "" {
		return "", nil
	}
	raw, err := hex.DecodeString(strings.ReplaceAll(uid, "-", ""))
	if err != nil || len(raw) != 16 || strings.Count(uid, "-") != 4 {
		return "", fmt.Errorf("uid %q is not a UUID", uid)
	}
	for i, b := range raw {
		if i != 6 && i != 8 {
			raw[i] = reverseBits(b)
		}
	}
	h := hex.EncodeToString(raw)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

func reverseBits(b byte) byte {
	var r byte
	for range 8 {
		r = r<<1 | b&1
		b >>= 1
	}
	return r
}

package dataplane

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// kube-proxy in nftables mode keeps its rules in the nftables tables
// "ip kube-proxy" and "ip6 kube-proxy" (its iptables and IPVS modes have
// none). The agent has no nftables dataplane: with nftablesMode Auto it
// programs iptables and reports the mode it found (felix/metrics/nftables.go).

const (
	nftMsgGetTable = unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETTABLE
	nftaTableName  = unix.NFTA_TABLE_NAME
)

// KubeProxyNFTables says whether this network namespace holds kube-proxy's
// nftables tables. It dumps the nftables tables over netlink (no nft
// binary needed); a kernel without nftables has none.
func KubeProxyNFTables() (bool, error) {
	req := nl.NewNetlinkRequest(nftMsgGetTable, unix.NLM_F_DUMP)
	req.AddData(&nl.Nfgenmsg{NfgenFamily: unix.AF_UNSPEC, Version: unix.NFNETLINK_V0})
	msgs, err := req.Execute(unix.NETLINK_NETFILTER, 0)
	if err != nil && !errors.Is(err, nl.ErrDumpInterrupted) {
		if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ENOENT) {
			return false, nil // no nf_tables in this kernel
		}
		return false, fmt.Errorf("listing nftables tables: %w", err)
	}
	for _, m := range msgs {
		if len(m) < nl.SizeofNfgenmsg {
			continue
		}
		family := m[0]
		if family != unix.NFPROTO_IPV4 && family != unix.NFPROTO_IPV6 {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[nl.SizeofNfgenmsg:])
		if err != nil {
			return false, fmt.Errorf("parsing an nftables table: %w", err)
		}
		for _, a := range attrs {
			if a.Attr.Type == nftaTableName && string(bytes.TrimRight(a.Value, "\x00")) == "kube-proxy" {
				return true, nil
			}
		}
	}
	return false, nil
}

package rules

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"

	"github.com/calico-aio/calico-aio/store/selector"
)

// Kernel name limits.
const (
	MaxChainName = 28 // iptables (XT_EXTENSION_MAXNAMELEN - 1)
	MaxIPSetName = 31 // ipset (IPSET_MAXNAMELEN - 1)
)

// Names of our fixed chains, as Calico names them.
const (
	ChainForward         = "cali-FORWARD"
	ChainInput           = "cali-INPUT"
	ChainOutput          = "cali-OUTPUT"
	ChainWorkloadToHost  = "cali-wl-to-host"
	ChainFromWlDispatch  = "cali-from-wl-dispatch"
	ChainToWlDispatch    = "cali-to-wl-dispatch"
	ChainFailsafeIn      = "cali-failsafe-in"
	ChainFailsafeOut     = "cali-failsafe-out"
	ChainNATPrerouting   = "cali-PREROUTING"
	ChainNATOutput       = "cali-OUTPUT"
	ChainNATPostrouting  = "cali-POSTROUTING"
	ChainFloatingIPDNAT  = "cali-fip-dnat"
	ChainFloatingIPSNAT  = "cali-fip-snat"
	ChainNATOutgoing     = "cali-nat-outgoing"
	policyInPrefix       = "cali-pi-"
	policyOutPrefix      = "cali-po-"
	profileInPrefix      = "cali-pri-"
	profileOutPrefix     = "cali-pro-"
	toWorkloadPrefix     = "cali-tw-"
	fromWorkloadPrefix   = "cali-fw-"
	ipsetMasqPoolsSuffix = "masq-ipam-pools"
	ipsetAllPoolsSuffix  = "all-ipam-pools"
	ipsetAllHostsSuffix  = "all-hosts-net"
)

// Directions of policy and profile chains: "i" is ingress (traffic to the
// workload), "o" is egress (traffic from it).
const (
	DirIngress = "i"
	DirEgress  = "o"
)

// PolicyChainName is "cali-pi-_<hash>" (ingress) or "cali-po-_<hash>"
// (egress): a hash of "<namespace>/<name>" (namespace empty for global
// policies), exactly MaxChainName long.
func PolicyChainName(dir string, k PolicyKey) string {
	prefix := policyInPrefix
	if dir == DirEgress {
		prefix = policyOutPrefix
	}
	return hashedName(prefix, k.Namespace+"/"+k.Name, MaxChainName)
}

// ProfileChainName is "cali-pri-<name>" (ingress) or "cali-pro-<name>"
// (egress); a name that is too long or has unusual characters is replaced
// by "_<hash>".
func ProfileChainName(dir string, name string) string {
	prefix := profileInPrefix
	if dir == DirEgress {
		prefix = profileOutPrefix
	}
	return limitedName(prefix, name)
}

// EndpointChainName is "cali-tw-<iface>" (dir "tw": traffic to the
// workload) or "cali-fw-<iface>" (dir "fw": traffic from it). Interface
// names are at most 15 characters, so the name is normally the interface's.
func EndpointChainName(dir string, iface string) string {
	prefix := toWorkloadPrefix
	if dir == "fw" {
		prefix = fromWorkloadPrefix
	}
	return limitedName(prefix, iface)
}

// IPSetName is the deterministic name of an IP set spec: "cali40s:<hash>"
// for selectors, "cali40n:<hash>" for named ports, "cali40sva:<hash>" and
// "cali40svc:<hash>" for a service's addresses and its addresses with
// ports, "cali40masq-ipam-pools"
// and "cali40all-ipam-pools" for pools, "cali40all-hosts-net" for the
// nodes' addresses ("cali60..." for IPv6). Hashes are
// of the canonical selector texts, so equivalent selectors share a set.
func IPSetName(ipVersion int, spec IPSetSpec) string {
	prefix := "cali40"
	if ipVersion == 6 {
		prefix = "cali60"
	}
	switch spec.Kind {
	case IPSetAllHosts:
		return prefix + ipsetAllHostsSuffix
	case IPSetThisHost:
		return prefix + ipsetThisHostSuffix
	case IPSetPools:
		if spec.NATOutgoing {
			return prefix + ipsetMasqPoolsSuffix
		}
		return prefix + ipsetAllPoolsSuffix
	case IPSetService, IPSetServicePorts:
		p := prefix + "sva:"
		if spec.Kind == IPSetServicePorts {
			p = prefix + "svc:"
		}
		return p + hashOf("service\x00" + spec.Service)[:MaxIPSetName-len(p)]
	case IPSetNamedPort:
		id := "named\x00" + strings.ToLower(spec.Protocol) + "\x00" + spec.PortName + "\x00" +
			canonicalSelector(spec.Selector) + "\x00" + nsSelectorKey(spec.NamespaceSelector)
		p := prefix + "n:"
		return p + hashOf(id)[:MaxIPSetName-len(p)]
	}
	sel := canonicalSelector(spec.Selector)
	p := prefix + "s:"
	if spec.NamespaceSelector == "" && spec.ServiceAccountSelector == "" {
		if s, err := selector.Parse(sel); err == nil {
			return p + s.UniqueID()[:MaxIPSetName-len(p)]
		}
	}
	id := sel + "\x00" + nsSelectorKey(spec.NamespaceSelector)
	if spec.ServiceAccountSelector != "" {
		id += "\x00sa\x00" + canonicalSelector(spec.ServiceAccountSelector)
	}
	return p + hashOf(id)[:MaxIPSetName-len(p)]
}

// canonicalSelector is the canonical text of a selector, or the text
// itself (trimmed) when it does not parse: the calculation graph then finds
// no members, and the name stays deterministic.
func canonicalSelector(s string) string {
	sel, err := selector.Parse(s)
	if err != nil {
		return strings.TrimSpace(s)
	}
	return sel.String()
}

func nsSelectorKey(s string) string {
	if s == "" {
		return ""
	}
	return "ns:" + canonicalSelector(s)
}

// hashOf is the base64url SHA-256 of s (43 characters).
func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// hashedName is prefix + "_" + a hash of id, cut to max characters.
func hashedName(prefix, id string, max int) string {
	return (prefix + "_" + hashOf(id))[:max]
}

// limitedName is prefix+id when that fits a chain name and id is made of
// characters safe in one, else the hashed form.
func limitedName(prefix, id string) string {
	if id == "" || len(prefix)+len(id) > MaxChainName || strings.HasPrefix(id, "_") {
		return hashedName(prefix, id, MaxChainName)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return hashedName(prefix, id, MaxChainName)
		}
	}
	return prefix + id
}

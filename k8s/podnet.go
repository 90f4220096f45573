package k8s

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/calico-aio/calico-aio/store/api"
)

// The pod annotations that add to a pod's endpoint beyond its addresses, as
// in Calico 3.32: both the CNI plugin (at ADD, on etcd) and the Kubernetes
// datastore's derivation of a pod's endpoint read them.
const (
	// AnnotFloatingIPs is a JSON list of addresses NAT'ed to the pod's
	// address of the same family (spec.ipNATs).
	AnnotFloatingIPs = "cni.projectcalico.org/floatingIPs"
	// AnnotAllowedSourcePrefixes is a JSON list of CIDRs the pod may send
	// from besides its own addresses (spec.allowSpoofedSourcePrefixes).
	AnnotAllowedSourcePrefixes = "cni.projectcalico.org/allowedSourcePrefixes"
)

// StringList parses a JSON list of strings, each trimmed; an empty entry is
// refused, an empty list is not.
func StringList(v string) ([]string, error) {
	var out []string
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		return nil, fmt.Errorf("%q is not a JSON list of strings", v)
	}
	for i, s := range out {
		if out[i] = strings.TrimSpace(s); out[i] == "" {
			return nil, fmt.Errorf("%q has an empty entry", v)
		}
	}
	return out, nil
}

// AddrList parses a JSON list of IP addresses (IPv4-mapped ones as IPv4).
func AddrList(v string) ([]netip.Addr, error) {
	list, err := StringList(v)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(list))
	for _, s := range list {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not an IP address", s)
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}

// SourcePrefixes parses allowedSourcePrefixes as Calico does: a JSON list
// (possibly empty) of CIDRs of either family, each written with a prefix
// length (a bare address is refused) and kept with its host bits cleared.
func SourcePrefixes(v string) ([]string, error) {
	var list []string
	if err := json.Unmarshal([]byte(v), &list); err != nil {
		return nil, fmt.Errorf("%q is not a JSON list of strings", v)
	}
	var out []string
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR", s)
		}
		out = append(out, p.Masked().String())
	}
	return out, nil
}

// FloatingIPNATs maps each floating IP, in order, to the pod's first
// address of its family. Floating IPs of a family the pod has no address of
// are returned as unmatched (Calico's derivation leaves them out; its CNI
// plugin's ADD is refused here).
func FloatingIPNATs(floating, podAddrs []netip.Addr) (nats []api.IPNAT, unmatched []netip.Addr) {
	for _, f := range floating {
		var internal netip.Addr
		for _, a := range podAddrs {
			if a.Is4() == f.Is4() {
				internal = a
				break
			}
		}
		if !internal.IsValid() {
			unmatched = append(unmatched, f)
			continue
		}
		nats = append(nats, api.IPNAT{InternalIP: internal.String(), ExternalIP: f.String()})
	}
	return nats, unmatched
}

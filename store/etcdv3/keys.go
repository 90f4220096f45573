package etcdv3

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/calico-aio/calico-aio/store/api"
)

// Key layout, exactly as Calico's etcdv3 datastore.
const (
	ResourcePrefix = "/calico/resources/v3/projectcalico.org/"
	IPAMPrefix     = "/calico/ipam/v2/"
	BlockPrefix    = IPAMPrefix + "assignment/"
	HandlePrefix   = IPAMPrefix + "handle/"
	HostPrefix     = IPAMPrefix + "host/"
	IPAMConfigKey  = IPAMPrefix + "config"
)

// Keys of our own, outside Calico's layout (Calico has no such keys; real
// Calico components ignore them).
const (
	// AIOPrefix holds what this agent keeps beside Calico's keys.
	AIOPrefix = "/calico/aio/v1/"
	// ServicePrefix holds each Kubernetes Service's endpoints, as the
	// controller publishes them for rule services matches
	// (ServiceEndpointsKey, services.go).
	ServicePrefix = AIOPrefix + "services/"
)

// ServiceEndpointsKey is /calico/aio/v1/services/<namespace>/<name>.
func ServiceEndpointsKey(namespace, name string) string {
	return ServicePrefix + namespace + "/" + name
}

// ResourceKey is the key of a resource; ns is ignored for cluster-scoped kinds.
func ResourceKey(k api.KindInfo, ns, name string) string {
	if k.Namespaced {
		return ResourcePrefix + k.Plural + "/" + ns + "/" + name
	}
	return ResourcePrefix + k.Plural + "/" + name
}

// ResourceListPrefix is the prefix listing a kind (in one namespace when ns is set).
func ResourceListPrefix(k api.KindInfo, ns string) string {
	if k.Namespaced && ns != "" {
		return ResourcePrefix + k.Plural + "/" + ns + "/"
	}
	return ResourcePrefix + k.Plural + "/"
}

func family(p netip.Prefix) string {
	if p.Addr().Is4() {
		return "ipv4"
	}
	return "ipv6"
}

func cidrSegment(p netip.Prefix) string { return strings.Replace(p.String(), "/", "-", 1) }

// BlockKey is /calico/ipam/v2/assignment/ipv4/block/10.65.0.0-26.
func BlockKey(cidr netip.Prefix) string {
	return BlockPrefix + family(cidr) + "/block/" + cidrSegment(cidr)
}

// AffinityKey is /calico/ipam/v2/host/<node>/ipv4/block/10.65.0.0-26.
func AffinityKey(node string, cidr netip.Prefix) string {
	return HostPrefix + node + "/" + family(cidr) + "/block/" + cidrSegment(cidr)
}

// HostAffinityPrefix lists a node's affinities of one family ("ipv4"/"ipv6"), or all with "".
func HostAffinityPrefix(node, fam string) string {
	if fam == "" {
		return HostPrefix + node + "/"
	}
	return HostPrefix + node + "/" + fam + "/block/"
}

// HandleKey is /calico/ipam/v2/handle/<id>.
func HandleKey(id string) string { return HandlePrefix + id }

// ParseCIDRSegment turns "10.65.0.0-26" back into a prefix.
func ParseCIDRSegment(seg string) (netip.Prefix, error) {
	i := strings.LastIndexByte(seg, '-')
	if i < 0 {
		return netip.Prefix{}, fmt.Errorf("key segment %q is not a CIDR with '-' for '/'", seg)
	}
	return netip.ParsePrefix(seg[:i] + "/" + seg[i+1:])
}

// ServiceOfKey splits a ServiceEndpointsKey into namespace and name.
func ServiceOfKey(key string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(key, ServicePrefix)
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	return namespace, name, true
}

// Package rules renders Calico's policy model into iptables chains. It is
// pure: the calculation graph hands it resolved endpoints, policies and
// profiles; it returns the chains per table and the IP sets the rules need.
package rules

import (
	"net/netip"

	"github.com/calico-aio/calico-aio/store/api"
)

// PolicyKey names a policy: Namespace is empty for GlobalNetworkPolicy.
type PolicyKey struct {
	Namespace string
	Name      string
}

// Policy is a NetworkPolicy or GlobalNetworkPolicy as the rules need it.
type Policy struct {
	Key     PolicyKey
	Ingress []api.Rule
	Egress  []api.Rule
}

// Profile is a Profile's rules.
type Profile struct {
	Name    string
	Ingress []api.Rule
	Egress  []api.Rule
}

// NAT is a floating IP of an endpoint: External is DNATted to Internal.
type NAT struct {
	Internal netip.Addr
	External netip.Addr
}

// Tier is one tier's policies that apply to an endpoint in one direction,
// in order (by order, then name). A tier none of whose policies applies
// is left out: it is skipped entirely.
type Tier struct {
	Name string
	// DefaultAction is what a packet the tier's policies gave no verdict
	// gets at its end: api.ActionPass goes on to the next tier (or the
	// profiles); anything else (api.ActionDeny, or empty) drops it.
	DefaultAction api.Action
	Policies      []PolicyKey
}

// Endpoint is a local workload endpoint with the policies that apply to it,
// and its profiles in order. The tiers are in order (by order, then name).
// IngressPolicies and EgressPolicies are shorthand, used only when the
// direction's tiers are empty, for one Deny tier "default" holding them.
type Endpoint struct {
	Iface            string // host-side interface, e.g. cali1234567890a
	Addrs            []netip.Addr
	IngressTiers     []Tier
	EgressTiers      []Tier
	IngressPolicies  []PolicyKey
	EgressPolicies   []PolicyKey
	Profiles         []string
	NATs             []NAT
	AllowSpoofedFrom []netip.Prefix
	// QoS is the endpoint's qosControls with Calico's defaults filled in
	// (api.QoSControls.WithDefaults); nil: no limits.
	QoS *api.QoSControls
}

// IPSetKind says what an IP set holds.
type IPSetKind int

const (
	// IPSetSelector holds the addresses (hash:net) of every endpoint and
	// network set matching a selector.
	IPSetSelector IPSetKind = iota
	// IPSetNamedPort holds address,protocol:port entries (hash:ip,port) of
	// matching endpoints for a named port.
	IPSetNamedPort
	// IPSetPools holds the CIDRs of IP pools (hash:net): all pools, or the
	// natOutgoing ones.
	IPSetPools
	// IPSetService holds the endpoint addresses (hash:net) of a Kubernetes
	// Service (a rule's source.services).
	IPSetService
	// IPSetServicePorts holds address,protocol:port entries (hash:ip,port)
	// of a Service's endpoints and their ports (destination.services).
	IPSetServicePorts
	// IPSetAllHosts holds every Calico node's IPv4 address (hash:net), the
	// set IP-in-IP also uses: natOutgoingExclusions IPPoolsAndHostIPs keeps
	// traffic to them from being NATed.
	IPSetAllHosts
	// IPSetThisHost holds this host's own addresses (hash:ip), those of
	// every interface but the workload and excluded ones: kube-proxy IPVS
	// mode's node ports are at them (ipvs.go).
	IPSetThisHost
)

// IPSetSpec describes an IP set a rule references; the calculation graph
// computes its members.
type IPSetSpec struct {
	Name string // IPSetName of the other fields: "cali40s:...", "cali60n:..." (<= 31 chars)
	Kind IPSetKind
	// Selector is the effective label selector, already combined with the
	// namespace restriction of a namespaced policy.
	Selector string
	// NamespaceSelector, when set, must also match the labels of the
	// endpoint's namespace.
	NamespaceSelector string
	// ServiceAccountSelector, when set, must also match the labels of the
	// endpoint's service account (a rule's serviceAccounts.selector).
	ServiceAccountSelector string
	// For named ports.
	PortName string
	Protocol string // "tcp", "udp", "sctp", "udplite"
	// For services: "<namespace>/<name>".
	Service string
	// For pools: only the natOutgoing pools (the "masq" set) rather than
	// all pools of the IP version.
	NATOutgoing bool
}

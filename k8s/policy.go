package k8s

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"github.com/calico-aio/calico-aio/store/api"
)

// NetworkPolicyPrefix is put before a Kubernetes NetworkPolicy's name to
// name its Calico policy, in the policy's own namespace.
const NetworkPolicyPrefix = "knp.default."

// NetworkPolicyOrder is the order of every converted NetworkPolicy, after
// Calico policies with lower orders, as in Calico.
const NetworkPolicyOrder = 1000.0

var networkPolicyKind, _ = api.LookupKind("NetworkPolicy")

// NetworkPolicyToCalico converts a Kubernetes NetworkPolicy to the Calico
// NetworkPolicy "knp.default.<name>" in the same namespace, tier default,
// order 1000, as Calico's kube-controllers do:
//
//   - The selector is the podSelector restricted to Kubernetes pods
//     (projectcalico.org/orchestrator == 'k8s').
//   - Types are policyTypes; without any, Ingress plus Egress when there
//     are egress rules (the API server's default).
//   - Each Kubernetes rule becomes Allow rules: one per protocol (sorted;
//     TCP when a port names none) and peer, the protocol's ports merged
//     into the fewest ranges. No peers matches anywhere, no ports every
//     protocol and port. A pod selector without a namespace selector is
//     left to the policy's namespace, as for any Calico NetworkPolicy
//     selector; an empty namespaceSelector is all(): every namespace.
//   - No rules for a listed type means that direction is denied.
//
// A Kubernetes rule that cannot be converted (a bad CIDR, port or
// selector) is left out and named in the returned error, and the policy is
// returned too: leaving out an Allow rule only ever denies more, so the
// caller should store the policy and report the error, as Calico does.
// When the podSelector itself cannot be converted the policy is nil.
func NetworkPolicyToCalico(np NetworkPolicy) (*api.NetworkPolicy, error) {
	id := np.Metadata.Namespace + "/" + np.Metadata.Name
	sel, err := podSelectorToCalico(&np.Spec.PodSelector)
	if err != nil {
		return nil, fmt.Errorf("NetworkPolicy %s: spec.podSelector: %w", id, err)
	}
	var errs []error
	var ingress, egress []api.Rule
	for i, r := range np.Spec.Ingress {
		rules, err := ruleToCalico(r.From, r.Ports, true)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.ingress[%d]: %w", i, err))
			continue
		}
		ingress = append(ingress, rules...)
	}
	for i, r := range np.Spec.Egress {
		rules, err := ruleToCalico(r.To, r.Ports, false)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.egress[%d]: %w", i, err))
			continue
		}
		egress = append(egress, rules...)
	}

	p := networkPolicyKind.NewObject().(*api.NetworkPolicy)
	p.Metadata.Name = NetworkPolicyPrefix + np.Metadata.Name
	p.Metadata.Namespace = np.Metadata.Namespace
	order := NetworkPolicyOrder
	p.Spec = api.NetworkPolicySpec{
		Tier:     api.DefaultTierName,
		Order:    &order,
		Selector: sel,
		Ingress:  ingress,
		Egress:   egress,
		Types:    policyTypes(np.Spec),
	}
	if len(errs) > 0 {
		return p, fmt.Errorf("NetworkPolicy %s: left out rules that cannot be converted: %w", id, errors.Join(errs...))
	}
	return p, nil
}

// policyTypes are the Calico types for spec.policyTypes. Unknown entries
// are ignored; when nothing is left the policy is an ingress policy.
func policyTypes(s NetworkPolicySpec) []api.PolicyType {
	in, out := false, false
	if len(s.PolicyTypes) == 0 {
		in, out = true, len(s.Egress) > 0
	}
	for _, t := range s.PolicyTypes {
		in = in || t == string(api.PolicyTypeIngress)
		out = out || t == string(api.PolicyTypeEgress)
	}
	var types []api.PolicyType
	if in || !out {
		types = append(types, api.PolicyTypeIngress)
	}
	if out {
		types = append(types, api.PolicyTypeEgress)
	}
	return types
}

// peer is the part of a Calico entity rule a NetworkPolicyPeer fills in.
type peer struct {
	selector, namespaceSelector string
	nets, notNets               []string
}

// protoPorts are the ports of one protocol; all means every port.
type protoPorts struct {
	all   bool
	ports []api.Port
}

// ruleToCalico converts one Kubernetes rule: its peers (from or to) and
// ports, as ingress or egress Calico rules.
func ruleToCalico(k8sPeers []NetworkPolicyPeer, k8sPorts []NetworkPolicyPort, ingress bool) ([]api.Rule, error) {
	peers := []peer{{}} // no peers: anywhere
	if len(k8sPeers) > 0 {
		peers = peers[:0]
	}
	for i, kp := range k8sPeers {
		p, err := peerToCalico(kp)
		if err != nil {
			return nil, fmt.Errorf("peer %d: %w", i, err)
		}
		peers = append(peers, p)
	}

	// Group ports by protocol; the group "" (no protocol) is every port.
	groups := map[string]*protoPorts{}
	if len(k8sPorts) == 0 {
		groups[""] = &protoPorts{all: true}
	}
	for i, kp := range k8sPorts {
		proto := api.ProtocolTCP
		if kp.Protocol != nil {
			proto = *kp.Protocol
		}
		if !api.ProtocolFromString(proto).SupportsPorts() {
			return nil, fmt.Errorf("ports[%d]: protocol %q is not TCP, UDP or SCTP", i, proto)
		}
		g := groups[proto]
		if g == nil {
			g = &protoPorts{}
			groups[proto] = g
		}
		if kp.Port == nil {
			g.all, g.ports = true, nil
			continue
		}
		port, err := portToCalico(kp)
		if err != nil {
			return nil, fmt.Errorf("ports[%d]: %w", i, err)
		}
		if !g.all {
			g.ports = append(g.ports, port)
		}
	}
	protos := make([]string, 0, len(groups))
	for p := range groups {
		protos = append(protos, p)
	}
	slices.Sort(protos)

	var rules []api.Rule
	for _, proto := range protos {
		ports := simplifyPorts(groups[proto].ports)
		for _, p := range peers {
			r := api.Rule{Action: api.ActionAllow}
			if proto != "" {
				pr := api.ProtocolFromString(proto)
				r.Protocol = &pr
			}
			e := api.EntityRule{
				Selector:          p.selector,
				NamespaceSelector: p.namespaceSelector,
				Nets:              slices.Clone(p.nets),
				NotNets:           slices.Clone(p.notNets),
			}
			if ingress {
				r.Source = e
			} else {
				r.Destination = e
			}
			r.Destination.Ports = slices.Clone(ports)
			rules = append(rules, r)
		}
	}
	return rules, nil
}

// peerToCalico converts a peer: an ipBlock to nets and notNets, otherwise
// its selectors (a missing pod selector is every Kubernetes pod).
func peerToCalico(kp NetworkPolicyPeer) (peer, error) {
	if b := kp.IPBlock; b != nil {
		if kp.PodSelector != nil || kp.NamespaceSelector != nil {
			return peer{}, fmt.Errorf("ipBlock cannot be combined with podSelector or namespaceSelector")
		}
		cidr, err := netip.ParsePrefix(b.CIDR)
		if err != nil {
			return peer{}, fmt.Errorf("ipBlock.cidr: %w", err)
		}
		cidr = cidr.Masked()
		p := peer{nets: []string{cidr.String()}}
		for i, s := range b.Except {
			ex, err := netip.ParsePrefix(s)
			if err != nil {
				return peer{}, fmt.Errorf("ipBlock.except[%d]: %w", i, err)
			}
			ex = ex.Masked()
			if ex.Addr().Is4() != cidr.Addr().Is4() || ex.Bits() < cidr.Bits() || !cidr.Contains(ex.Addr()) {
				return peer{}, fmt.Errorf("ipBlock.except[%d]: %s is not inside cidr %s", i, ex, cidr)
			}
			p.notNets = append(p.notNets, ex.String())
		}
		return p, nil
	}
	sel, err := podSelectorToCalico(kp.PodSelector)
	if err != nil {
		return peer{}, fmt.Errorf("podSelector: %w", err)
	}
	nsSel, err := LabelSelectorToCalico(kp.NamespaceSelector)
	if err != nil {
		return peer{}, fmt.Errorf("namespaceSelector: %w", err)
	}
	return peer{selector: sel, namespaceSelector: nsSel}, nil
}

// portToCalico converts a port that has one: a number, a name (a numeric
// string is a number, as in Calico) or the range port..endPort.
func portToCalico(kp NetworkPolicyPort) (api.Port, error) {
	s := kp.Port.String()
	if kp.EndPort != nil {
		s += ":" + strconv.Itoa(int(*kp.EndPort))
	}
	p, err := api.ParsePort(s)
	if err != nil {
		return api.Port{}, err
	}
	return p, nil
}

// simplifyPorts merges numeric ports into the fewest ranges, sorted, after
// the named ports in their given order (Calico's SimplifyPorts). With at
// most one numeric port there is nothing to merge and the list is kept.
func simplifyPorts(ports []api.Port) []api.Port {
	var named []api.Port
	var ranges [][2]int
	count := 0
	for _, p := range ports {
		if p.PortName != "" {
			named = append(named, p)
			continue
		}
		ranges = append(ranges, [2]int{int(p.MinPort), int(p.MaxPort)})
		count += int(p.MaxPort) - int(p.MinPort) + 1
	}
	if count <= 1 {
		return ports
	}
	slices.SortFunc(ranges, func(a, b [2]int) int { return a[0] - b[0] })
	out := named
	cur := ranges[0]
	flush := func() { out = append(out, api.PortRange(uint16(cur[0]), uint16(cur[1]))) }
	for _, r := range ranges[1:] {
		if r[0] <= cur[1]+1 {
			cur[1] = max(cur[1], r[1])
			continue
		}
		flush()
		cur = r
	}
	flush()
	return out
}

package calc

import (
	"net/netip"
	"slices"
	"sort"

	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/store/api"
)

// Host endpoints, as Calico: a HostEndpoint whose spec.node is this node
// applies to its spec.interfaceName ("*": every host interface), or, with
// no interface name, to the host interfaces carrying one of its
// spec.expectedIPs. Its labels are its own over its profiles'; only
// GlobalNetworkPolicies select it (a NetworkPolicy is namespaced). Host
// endpoints are few, so they are matched in full on every Desired.

func (s *State) applyHostEndpoint(u Update) {
	if u.Deleted {
		delete(s.heps, u.Key)
	} else if h, ok := u.Resource.(*api.HostEndpoint); ok {
		s.heps[u.Key] = h
	}
	s.dirtySources[u.Key] = true
}

// NeedsHostInterfaces reports whether a local host endpoint is given by
// expectedIPs only, or is "*" while interfaceExclude has a /regexp/, so
// the agent must read the host's interfaces.
func (s *State) NeedsHostInterfaces() bool {
	regexps := len(s.interfaceExclude().res) > 0
	for _, h := range s.heps {
		if h.Spec.Node == s.node && (h.Spec.InterfaceName == "" || h.Spec.InterfaceName == rules.AllInterfaces && regexps) {
			return true
		}
	}
	return false
}

// SetHostInterfaces records the host's interfaces with their addresses
// (the agent reads them from the kernel), for host endpoints given by
// expectedIPs. It is an input like a datastore update.
func (s *State) SetHostInterfaces(ifaces map[string][]netip.Addr) { s.hostIfaces = ifaces }

// hostEndpointLabels are a host endpoint's effective labels.
func (s *State) hostEndpointLabels(h *api.HostEndpoint) layeredLabels {
	l := layeredLabels{own: h.Metadata.Labels}
	for _, p := range h.Spec.Profiles {
		if prof, ok := s.profiles[p]; ok && len(prof.Spec.LabelsToApply) > 0 {
			l.inherits = append(l.inherits, prof.Spec.LabelsToApply)
		}
	}
	return l
}

// hostEndpointAddrs are the addresses a host endpoint stands for in
// other endpoints' rules: its expectedIPs.
func hostEndpointAddrs(h *api.HostEndpoint) []netip.Addr {
	var out []netip.Addr
	for _, ip := range h.Spec.ExpectedIPs {
		if a, err := netip.ParseAddr(ip); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// hostEndpointIfaces resolves a local host endpoint to interfaces.
func (s *State) hostEndpointIfaces(h *api.HostEndpoint) []string {
	exclude := s.interfaceExclude()
	if h.Spec.InterfaceName == rules.AllInterfaces {
		return []string{h.Spec.InterfaceName}
	}
	if h.Spec.InterfaceName != "" {
		if exclude.match(h.Spec.InterfaceName) {
			return nil
		}
		return []string{h.Spec.InterfaceName}
	}
	want := hostEndpointAddrs(h)
	var out []string
	for iface, addrs := range s.hostIfaces {
		if exclude.match(iface) {
			continue
		}
		for _, a := range addrs {
			if slices.Contains(want, a.Unmap()) {
				out = append(out, iface)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// appliesToHost reports whether a policy selects a host endpoint: a
// global policy whose selector matches its labels. A host endpoint has no
// namespace and no service account: such selectors see no labels.
func (s *State) appliesToHost(p *policy, h *api.HostEndpoint) bool {
	if p.key.Namespace != "" || !p.sel.EvaluateLabels(s.hostEndpointLabels(h)) {
		return false
	}
	none := layeredLabels{}
	if p.nsSel != nil && !p.nsSel.EvaluateLabels(none) {
		return false
	}
	return p.saSel == nil || p.saSel.EvaluateLabels(none)
}

// localHostEndpoints renders this node's host endpoints, one per
// interface (of several on one interface the first by name wins, as the
// renderer keeps the first given), with their policies by kind. It also
// returns the policies they use.
func (s *State) localHostEndpoints() ([]rules.HostEndpoint, []rules.PolicyKey) {
	keys := make([]string, 0, len(s.heps))
	for k, h := range s.heps {
		if h.Spec.Node == s.node {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return s.heps[keys[i]].Metadata.Name < s.heps[keys[j]].Metadata.Name })
	var out []rules.HostEndpoint
	var used []rules.PolicyKey
	for _, k := range keys {
		h := s.heps[k]
		ifaces := s.hostEndpointIfaces(h)
		if len(ifaces) == 0 {
			continue
		}
		var normal, forward, preDNAT, untracked []rules.PolicyKey
		for pk, p := range s.policies {
			if !s.appliesToHost(p, h) {
				continue
			}
			used = append(used, pk)
			switch {
			case p.doNotTrack:
				untracked = append(untracked, pk)
			case p.preDNAT:
				preDNAT = append(preDNAT, pk)
			default:
				normal = append(normal, pk)
				if p.applyOnForward {
					forward = append(forward, pk)
				}
			}
		}
		r := rules.HostEndpoint{Name: h.Metadata.Name, Profiles: h.Spec.Profiles}
		r.IngressTiers, r.EgressTiers = s.orderedPolicies(normal)
		r.ForwardIngressTiers, r.ForwardEgressTiers = s.orderedPolicies(forward)
		r.PreDNATTiers, _ = s.orderedPolicies(preDNAT)
		r.UntrackedIngressTiers, r.UntrackedEgressTiers = s.orderedPolicies(untracked)
		for _, iface := range ifaces {
			r.Iface = iface
			out = append(out, r)
		}
	}
	return out, used
}

// hostEndpointUsesProfile reports whether a host endpoint inherits labels
// from a profile.
func hostEndpointUsesProfile(h *api.HostEndpoint, name string) bool {
	return slices.Contains(h.Spec.Profiles, name)
}

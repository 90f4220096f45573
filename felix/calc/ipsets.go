package calc

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/selector"
)

// IPSet is one desired IP set.
type IPSet struct {
	Type    string // hash:net, hash:ip,port (named ports, service ports)
	Family  string // inet, inet6
	Members []string
}

// ipsetState is an active IP set with its members by source, kept up to
// date incrementally: only sources that changed are evaluated again.
type ipsetState struct {
	spec    rules.IPSetSpec
	v6      bool
	sel     *selector.Selector
	nsSel   *selector.Selector
	saSel   *selector.Selector
	members map[string][]string // source key -> entries
	// sorted is the members as ipsetsDesired last gave them (the sources'
	// entries, deduplicated and sorted), nil when a source changed since.
	sorted []string
}

// sortedMembers is the set's entries from every source, deduplicated and
// sorted: made again only after a source's entries changed, else the slice
// given last time (shared: nobody changes it).
func (st *ipsetState) sortedMembers() []string {
	if st.sorted != nil || len(st.members) == 0 {
		return st.sorted
	}
	seen := map[string]bool{}
	var out []string
	for _, es := range st.members {
		for _, e := range es {
			if !seen[e] {
				seen[e] = true
				out = append(out, e)
			}
		}
	}
	sort.Strings(out)
	st.sorted = slices.Clip(out)
	return st.sorted
}

func sorted(members []string) []string {
	sort.Strings(members)
	return members
}

func newIPSetState(spec rules.IPSetSpec) *ipsetState {
	st := &ipsetState{spec: spec, v6: strings.HasPrefix(spec.Name, "cali60"), members: map[string][]string{}}
	st.sel, _ = selector.Parse(spec.Selector)
	if spec.NamespaceSelector != "" {
		st.nsSel, _ = selector.Parse(spec.NamespaceSelector)
	}
	if spec.ServiceAccountSelector != "" {
		st.saSel, _ = selector.Parse(spec.ServiceAccountSelector)
		if st.saSel == nil {
			st.sel = nil // an unparsable account selector matches nothing
		}
	}
	return st
}

func (st *ipsetState) want(a netip.Addr) bool { return a.Is6() == st.v6 }

// evalEndpoint returns the entries an endpoint contributes.
func (s *State) evalEndpoint(st *ipsetState, w *api.WorkloadEndpoint) []string {
	if st.sel == nil || !st.sel.EvaluateLabels(s.endpointLabels(w)) {
		return nil
	}
	if st.nsSel != nil && !st.nsSel.EvaluateLabels(s.namespaceLabels(w.Metadata.Namespace)) {
		return nil
	}
	if !s.matchesServiceAccount(st.saSel, w) {
		return nil
	}
	var out []string
	for _, n := range w.Spec.IPNetworks {
		p, err := netip.ParsePrefix(n)
		if err != nil || !st.want(p.Addr()) {
			continue
		}
		switch st.spec.Kind {
		case rules.IPSetSelector:
			out = append(out, p.Masked().String())
		case rules.IPSetNamedPort:
			for _, port := range w.Spec.Ports {
				if port.Name == st.spec.PortName && strings.EqualFold(port.Protocol.String(), st.spec.Protocol) {
					out = append(out, fmt.Sprintf("%s,%s:%d", p.Addr(), strings.ToLower(st.spec.Protocol), port.Port))
				}
			}
		}
	}
	return out
}

// evalNetset returns the entries a network set contributes.
func (s *State) evalNetset(st *ipsetState, ns *netset) []string {
	if st.spec.Kind != rules.IPSetSelector || st.sel == nil || st.saSel != nil {
		return nil // network sets have no service account
	}
	l := layeredLabels{own: ns.labels}
	if ns.namespace != "" {
		l.inherits = []map[string]string{{api.LabelNamespace: ns.namespace}}
	}
	if !st.sel.EvaluateLabels(l) {
		return nil
	}
	if st.nsSel != nil && (ns.namespace == "" || !st.nsSel.EvaluateLabels(s.namespaceLabels(ns.namespace))) {
		return nil
	}
	var out []string
	for _, p := range ns.nets {
		if st.want(p.Addr()) {
			out = append(out, p.String())
		}
	}
	return out
}

func (s *State) evalSource(st *ipsetState, key string) []string {
	if isServiceSet(st.spec.Kind) {
		return s.evalService(st, key)
	}
	if w, ok := s.weps[key]; ok {
		return s.evalEndpoint(st, w)
	}
	if ns, ok := s.netsets[key]; ok {
		return s.evalNetset(st, ns)
	}
	if h, ok := s.heps[key]; ok {
		return s.evalHostEndpoint(st, h)
	}
	return nil
}

// evalHostEndpoint returns the entries a host endpoint contributes: its
// expectedIPs, and for named ports its spec.ports, as in Calico. It has
// no namespace and no service account.
func (s *State) evalHostEndpoint(st *ipsetState, h *api.HostEndpoint) []string {
	none := layeredLabels{}
	if st.sel == nil || !st.sel.EvaluateLabels(s.hostEndpointLabels(h)) ||
		(st.nsSel != nil && !st.nsSel.EvaluateLabels(none)) || (st.saSel != nil && !st.saSel.EvaluateLabels(none)) {
		return nil
	}
	var out []string
	for _, a := range hostEndpointAddrs(h) {
		if !st.want(a) {
			continue
		}
		switch st.spec.Kind {
		case rules.IPSetSelector:
			out = append(out, netip.PrefixFrom(a, a.BitLen()).String())
		case rules.IPSetNamedPort:
			for _, port := range h.Spec.Ports {
				if port.Name == st.spec.PortName && strings.EqualFold(port.Protocol.String(), st.spec.Protocol) {
					out = append(out, fmt.Sprintf("%s,%s:%d", a, strings.ToLower(st.spec.Protocol), port.Port))
				}
			}
		}
	}
	return out
}

// refreshIPSets makes the active sets exactly specs: new sets are
// evaluated against every source, existing ones only against the sources
// that changed.
func (s *State) refreshIPSets(specs []rules.IPSetSpec, keep map[string]bool) {
	for _, spec := range specs {
		keep[spec.Name] = true
		st, ok := s.members[spec.Name]
		if ok && st.spec == spec {
			for key := range s.dirtySources {
				s.setSource(st, key)
			}
			continue
		}
		st = newIPSetState(spec)
		s.members[spec.Name] = st
		if spec.Kind == rules.IPSetPools || spec.Kind == rules.IPSetAllHosts || spec.Kind == rules.IPSetThisHost {
			continue
		}
		if isServiceSet(spec.Kind) {
			s.setSource(st, serviceSourceKey(spec))
			continue
		}
		for key := range s.weps {
			s.setSource(st, key)
		}
		for key := range s.netsets {
			s.setSource(st, key)
		}
		for key := range s.heps {
			s.setSource(st, key)
		}
	}
}

func (s *State) setSource(st *ipsetState, key string) {
	e := s.evalSource(st, key)
	if old, ok := st.members[key]; ok == (len(e) > 0) && slices.Equal(old, e) {
		return
	}
	st.sorted = nil
	if len(e) > 0 {
		st.members[key] = e
	} else {
		delete(st.members, key)
	}
}

// poolMembers fills the pool sets: all pools, or those with natOutgoing.
func (s *State) poolMembers(st *ipsetState) []string {
	masq := st.spec.NATOutgoing
	var out []string
	for _, p := range s.pools {
		pr, err := netip.ParsePrefix(p.Spec.CIDR)
		if err != nil || !st.want(pr.Addr()) || (masq && !p.Spec.NATOutgoing) {
			continue
		}
		out = append(out, pr.Masked().String())
	}
	return out
}

// ipsetsDesired renders the active sets.
func (s *State) ipsetsDesired() map[string]IPSet {
	out := make(map[string]IPSet, len(s.members))
	for name, st := range s.members {
		set := IPSet{Type: "hash:net", Family: "inet"}
		if st.v6 {
			set.Family = "inet6"
		}
		if st.spec.Kind == rules.IPSetNamedPort || st.spec.Kind == rules.IPSetServicePorts {
			set.Type = "hash:ip,port"
		}
		switch st.spec.Kind {
		case rules.IPSetPools:
			set.Members = sorted(s.poolMembers(st))
		case rules.IPSetAllHosts:
			set.Members = sorted(s.hostMembers())
		case rules.IPSetThisHost:
			set.Type, set.Members = "hash:ip", sorted(s.thisHostMembers(st))
		default:
			set.Members = st.sortedMembers() // kept sorted between calls
		}
		out[name] = set
	}
	return out
}

func canonicalLabels(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + m[k] + "\x00")
	}
	return b.String()
}

package rules

import (
	"reflect"
	"slices"
	"unsafe"

	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// EndpointMemo keeps each workload endpoint's chains (cali-tw-, cali-fw-)
// from one Render to the next, so that a pod added to a node with many
// renders its own chains and reuses the others' (issue #25: a render of
// every endpoint on every event made the agent's CPU per pod grow with
// the pods on the node). An endpoint's chains are a function of the
// configuration and of the endpoint alone (its tiers and policy keys,
// profiles, addresses, NATs, QoS), so they are reused while both are
// deeply equal to what they were rendered from. Render's output is the
// same with or without a memo. One memo per caller and IP version; not
// safe for concurrent use. A nil memo renders every endpoint.
type EndpointMemo struct {
	cfg  *Config
	eps  map[string]memoEntry // by interface
	seen map[string]bool      // interfaces of the current Render
	// dispatch holds the dispatch chains by name, with the lines they
	// were rendered from; next those of the current Render.
	dispatch, next map[string]dispatchEntry
	// rules holds policy and profile chains by name (rulesChain), with
	// what they were rendered from; renders counts Renders.
	rules   map[string]*rulesEntry
	renders uint64
	// names holds PolicyChainName (a hash) by direction and policy, with
	// the Render that last asked.
	names map[policyUse]nameEntry
}

type nameEntry struct {
	name   string
	render uint64
}

// policyChainName is PolicyChainName for u as an earlier Render found it.
func (m *EndpointMemo) policyChainName(u policyUse) (string, bool) {
	if m == nil {
		return "", false
	}
	e, ok := m.names[u]
	if ok && e.render != m.renders {
		m.names[u] = nameEntry{e.name, m.renders}
	}
	return e.name, ok
}

func (m *EndpointMemo) putPolicyChainName(u policyUse, name string) {
	if m != nil {
		m.names[u] = nameEntry{name, m.renders}
	}
}

// rulesEntry is one policy or profile chain and what it was rendered from:
// the rules slice (by identity: a caller replaces, never edits, the rules
// it gave a Render with a memo, as the calculation does with each new
// version of a policy), the namespace and deny action, and the IP sets its
// rules named.
type rulesEntry struct {
	first    *api.Rule
	n        int
	ns, deny string
	chain    iptables.Chain
	sets     []IPSetSpec
	render   uint64 // the Render that last used it
}

type dispatchEntry struct {
	lines []string
	chain iptables.Chain
}

type memoEntry struct {
	ep     Endpoint
	chains []iptables.Chain // clipped: an append by a later step copies
}

// begin starts a Render with cfg (defaults applied): a configuration
// different from the last one forgets every endpoint.
func (m *EndpointMemo) begin(cfg Config) {
	if m == nil {
		return
	}
	if m.cfg == nil || !reflect.DeepEqual(*m.cfg, cfg) {
		m.cfg, m.eps, m.dispatch, m.rules = &cfg, map[string]memoEntry{}, nil, map[string]*rulesEntry{}
		m.names = map[policyUse]nameEntry{}
	}
	m.renders++
	m.seen, m.next = map[string]bool{}, map[string]dispatchEntry{}
}

// dispatchChain returns d's chain, rendered by render only when its lines
// changed.
func (m *EndpointMemo) dispatchChain(d dispatchLines, render func(dispatchLines) iptables.Chain) iptables.Chain {
	if m == nil {
		return render(d)
	}
	if e, ok := m.dispatch[d.name]; ok && slices.Equal(e.lines, d.lines) {
		m.next[d.name] = e
		return e.chain
	}
	c := render(d)
	c.Rules = slices.Clip(c.Rules)
	m.next[d.name] = dispatchEntry{lines: d.lines, chain: c}
	return c
}

// chains returns ep's chains, rendered by render only when ep changed.
func (m *EndpointMemo) chains(ep Endpoint, render func(Endpoint) []iptables.Chain) []iptables.Chain {
	if m == nil {
		return render(ep)
	}
	m.seen[ep.Iface] = true
	if e, ok := m.eps[ep.Iface]; ok && endpointEqual(e.ep, ep) {
		return e.chains
	}
	cs := render(ep)
	for i := range cs {
		cs[i].Rules = slices.Clip(cs[i].Rules)
	}
	m.eps[ep.Iface] = memoEntry{ep: ep, chains: slices.Clip(cs)}
	return cs
}

// end forgets the endpoints the Render did not have.
func (m *EndpointMemo) end() {
	if m == nil {
		return
	}
	for iface := range m.eps {
		if !m.seen[iface] {
			delete(m.eps, iface)
		}
	}
	m.seen = nil
	m.dispatch, m.next = m.next, nil
	for name, e := range m.rules {
		if e.render != m.renders {
			delete(m.rules, name)
		}
	}
	for u, e := range m.names {
		if e.render != m.renders {
			delete(m.names, u)
		}
	}
}

// rulesChain returns chain name rendered from rs, ns and deny as the last
// Render had it, with the IP sets its rules named; ok false when it must
// be rendered.
func (m *EndpointMemo) rulesChain(name string, rs []api.Rule, ns, deny string) (iptables.Chain, []IPSetSpec, bool) {
	if m == nil {
		return iptables.Chain{}, nil, false
	}
	e, ok := m.rules[name]
	if !ok || e.first != unsafe.SliceData(rs) || e.n != len(rs) || e.ns != ns || e.deny != deny {
		return iptables.Chain{}, nil, false
	}
	e.render = m.renders
	return e.chain, e.sets, true
}

// putRulesChain records a rendered policy or profile chain.
func (m *EndpointMemo) putRulesChain(name string, rs []api.Rule, ns, deny string, c iptables.Chain, sets []IPSetSpec) {
	if m == nil {
		return
	}
	c.Rules = slices.Clip(c.Rules)
	m.rules[name] = &rulesEntry{first: unsafe.SliceData(rs), n: len(rs), ns: ns, deny: deny, chain: c, sets: sets, render: m.renders}
}

// endpointEqual reports whether a and b render the same chains: every
// field of Endpoint compared (TestEndpointEqualCoversEveryField holds the
// list), without reflection, which cost more than the rest of a memo hit.
func endpointEqual(a, b Endpoint) bool {
	return a.Iface == b.Iface && slices.Equal(a.Addrs, b.Addrs) &&
		slices.EqualFunc(a.IngressTiers, b.IngressTiers, tierEqual) && slices.EqualFunc(a.EgressTiers, b.EgressTiers, tierEqual) &&
		slices.Equal(a.IngressPolicies, b.IngressPolicies) && slices.Equal(a.EgressPolicies, b.EgressPolicies) &&
		slices.Equal(a.Profiles, b.Profiles) && slices.Equal(a.NATs, b.NATs) &&
		slices.Equal(a.AllowSpoofedFrom, b.AllowSpoofedFrom) &&
		(a.QoS == nil) == (b.QoS == nil) && (a.QoS == nil || *a.QoS == *b.QoS)
}

func tierEqual(a, b Tier) bool {
	return a.Name == b.Name && a.DefaultAction == b.DefaultAction && slices.Equal(a.Policies, b.Policies)
}

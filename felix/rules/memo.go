package rules

import (
	"maps"
	"reflect"
	"slices"
	"unsafe"

	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// Memo keeps chains from one Render to the next, so that an event renders
// what it changed and reuses the rest (issue #25: a render of everything
// on every event made the agent's CPU per pod grow with the pods and the
// policies on the node):
//   - each workload endpoint's chains (cali-tw-, cali-fw-), a function of
//     the configuration and of the endpoint alone (its tiers and policy
//     keys, profiles, addresses, NATs, QoS), reused while both are deeply
//     equal to what they were rendered from;
//   - the dispatch chains, reused while they list the same interfaces;
//   - each policy's and profile's chains, reused while rendered from the
//     same rules slice (by identity: a caller replaces, never edits, the
//     rules it gave a Render with a memo, as the calculation does with
//     each new version of a policy), namespace and deny action, with the
//     IP sets their rules name; and policy chain names (a hash each).
//
// What a Render did not use is forgotten at its end; a change of
// configuration forgets everything. Render's output is the same with or
// without a memo. One memo per caller and IP version; not safe for
// concurrent use. A nil memo renders everything.
type Memo struct {
	cfg      *Config
	renders  uint64                   // Renders begun; each entry records the last that used it
	eps      map[string]memoEntry     // by interface
	dispatch map[string]dispatchEntry // by chain name
	rules    map[string]rulesEntry    // by chain name
	names    map[policyUse]nameEntry
}

type memoEntry struct {
	ep     Endpoint
	chains []iptables.Chain // clipped: an append by a later step copies
	render uint64
}

type dispatchEntry struct {
	lines  []string
	chain  iptables.Chain
	render uint64
}

type rulesEntry struct {
	first    *api.Rule // the rules slice rendered, by identity
	n        int
	ns, deny string
	chain    iptables.Chain
	sets     []IPSetSpec
	render   uint64
}

type nameEntry struct {
	name   string
	render uint64
}

// begin starts a Render with cfg (defaults applied): a configuration
// different from the last one forgets everything.
func (m *Memo) begin(cfg Config) {
	if m == nil {
		return
	}
	if m.cfg == nil || !reflect.DeepEqual(*m.cfg, cfg) {
		m.cfg = &cfg
		m.eps, m.dispatch, m.rules, m.names = map[string]memoEntry{}, map[string]dispatchEntry{}, map[string]rulesEntry{}, map[policyUse]nameEntry{}
	}
	m.renders++
}

// end forgets what the Render did not use.
func (m *Memo) end() {
	if m == nil {
		return
	}
	maps.DeleteFunc(m.eps, func(_ string, e memoEntry) bool { return e.render != m.renders })
	maps.DeleteFunc(m.dispatch, func(_ string, e dispatchEntry) bool { return e.render != m.renders })
	maps.DeleteFunc(m.rules, func(_ string, e rulesEntry) bool { return e.render != m.renders })
	maps.DeleteFunc(m.names, func(_ policyUse, e nameEntry) bool { return e.render != m.renders })
}

// chains returns ep's chains, rendered by render only when ep changed.
func (m *Memo) chains(ep Endpoint, render func(Endpoint) []iptables.Chain) []iptables.Chain {
	if m == nil {
		return render(ep)
	}
	if e, ok := m.eps[ep.Iface]; ok && endpointEqual(e.ep, ep) {
		e.render = m.renders
		m.eps[ep.Iface] = e
		return e.chains
	}
	cs := render(ep)
	for i := range cs {
		cs[i].Rules = slices.Clip(cs[i].Rules)
	}
	m.eps[ep.Iface] = memoEntry{ep: ep, chains: slices.Clip(cs), render: m.renders}
	return cs
}

// dispatchChain returns d's chain, rendered by render only when its lines
// changed.
func (m *Memo) dispatchChain(d dispatchLines, render func(dispatchLines) iptables.Chain) iptables.Chain {
	if m == nil {
		return render(d)
	}
	if e, ok := m.dispatch[d.name]; ok && slices.Equal(e.lines, d.lines) {
		e.render = m.renders
		m.dispatch[d.name] = e
		return e.chain
	}
	c := render(d)
	c.Rules = slices.Clip(c.Rules)
	m.dispatch[d.name] = dispatchEntry{lines: d.lines, chain: c, render: m.renders}
	return c
}

// rulesChain returns chain name rendered from rs, ns and deny as the last
// Render had it, with the IP sets its rules named; ok false when it must
// be rendered.
func (m *Memo) rulesChain(name string, rs []api.Rule, ns, deny string) (iptables.Chain, []IPSetSpec, bool) {
	if m == nil {
		return iptables.Chain{}, nil, false
	}
	e, ok := m.rules[name]
	if !ok || e.first != unsafe.SliceData(rs) || e.n != len(rs) || e.ns != ns || e.deny != deny {
		return iptables.Chain{}, nil, false
	}
	e.render = m.renders
	m.rules[name] = e
	return e.chain, e.sets, true
}

// putRulesChain records a rendered policy or profile chain.
func (m *Memo) putRulesChain(name string, rs []api.Rule, ns, deny string, c iptables.Chain, sets []IPSetSpec) {
	if m == nil {
		return
	}
	c.Rules = slices.Clip(c.Rules)
	m.rules[name] = rulesEntry{first: unsafe.SliceData(rs), n: len(rs), ns: ns, deny: deny, chain: c, sets: sets, render: m.renders}
}

// policyChainName is PolicyChainName for u as an earlier Render found it.
func (m *Memo) policyChainName(u policyUse) (string, bool) {
	if m == nil {
		return "", false
	}
	e, ok := m.names[u]
	if ok {
		e.render = m.renders
		m.names[u] = e
	}
	return e.name, ok
}

func (m *Memo) putPolicyChainName(u policyUse, name string) {
	if m != nil {
		m.names[u] = nameEntry{name, m.renders}
	}
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

package calc

import (
	"math"
	"sort"
	"strings"

	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/selector"
)

// policy is a NetworkPolicy or GlobalNetworkPolicy reduced to what the
// calculation needs.
type policy struct {
	key     rules.PolicyKey
	tier    string // spec.tier ("default" when unset)
	order   float64
	sel     *selector.Selector // which endpoints it applies to
	nsSel   *selector.Selector // GlobalNetworkPolicy namespaceSelector (nil: none)
	saSel   *selector.Selector // serviceAccountSelector (nil: none)
	ingress bool               // applies to ingress (types)
	egress  bool
	// Host endpoint policy kinds (GlobalNetworkPolicy only): untracked
	// and pre-DNAT policies apply to host endpoints only.
	doNotTrack, preDNAT, applyOnForward bool
	rules                               rules.Policy
}

func (s *State) applyPolicy(u Update) {
	parts := strings.Split(strings.TrimPrefix(u.Key, "/calico/resources/v3/projectcalico.org/"), "/")
	key := rules.PolicyKey{Name: parts[len(parts)-1]}
	if len(parts) == 3 {
		key.Namespace = parts[1]
	}
	s.dirtyPolicies[key] = true
	s.policyEpoch++
	// Whatever happens below, the old version no longer applies.
	delete(s.policies, key)
	if u.Deleted {
		return
	}
	p := &policy{key: key, order: math.Inf(1)}
	var types []api.PolicyType
	var selText, nsSelText, saSelText string
	switch r := u.Resource.(type) {
	case *api.NetworkPolicy:
		r.Default()
		if r.Spec.Order != nil {
			p.order = *r.Spec.Order
		}
		selText, saSelText, types, p.tier = r.Spec.Selector, r.Spec.ServiceAccountSelector, r.Spec.Types, r.Spec.Tier
		p.rules = rules.Policy{Key: key, Ingress: r.Spec.Ingress, Egress: r.Spec.Egress}
	case *api.GlobalNetworkPolicy:
		r.Default()
		if r.Spec.Order != nil {
			p.order = *r.Spec.Order
		}
		selText, nsSelText, saSelText, types, p.tier = r.Spec.Selector, r.Spec.NamespaceSelector, r.Spec.ServiceAccountSelector, r.Spec.Types, r.Spec.Tier
		p.doNotTrack, p.preDNAT, p.applyOnForward = r.Spec.DoNotTrack, r.Spec.PreDNAT, r.Spec.ApplyOnForward
		p.rules = rules.Policy{Key: key, Ingress: r.Spec.Ingress, Egress: r.Spec.Egress}
	default:
		return
	}
	var err error
	if p.sel, err = selector.Parse(selText); err != nil {
		return // validated on write; an unparsable selector selects nothing
	}
	if nsSelText != "" {
		if p.nsSel, err = selector.Parse(nsSelText); err != nil {
			return
		}
	}
	if saSelText != "" {
		if p.saSel, err = selector.Parse(saSelText); err != nil {
			return
		}
	}
	for _, t := range types {
		p.ingress = p.ingress || t == api.PolicyTypeIngress
		p.egress = p.egress || t == api.PolicyTypeEgress
	}
	s.policies[key] = p
}

// appliesTo reports whether a policy selects an endpoint.
func (s *State) appliesTo(p *policy, w *api.WorkloadEndpoint) bool {
	if p.doNotTrack || p.preDNAT {
		return false // host endpoints only, as in Calico
	}
	if p.key.Namespace != "" && w.Metadata.Namespace != p.key.Namespace {
		return false
	}
	if !p.sel.EvaluateLabels(s.endpointLabels(w)) {
		return false
	}
	if p.nsSel != nil && !p.nsSel.EvaluateLabels(s.namespaceLabels(w.Metadata.Namespace)) {
		return false
	}
	return s.matchesServiceAccount(p.saSel, w)
}

// refreshLocalPolicies re-matches what changed: dirty local endpoints
// against every policy, dirty policies against every local endpoint.
func (s *State) refreshLocalPolicies() {
	for k := range s.dirtyLocal {
		w, ok := s.weps[k]
		if !ok || !s.isLocal(w) {
			delete(s.localPolicies, k)
			continue
		}
		var keys []rules.PolicyKey
		for pk, p := range s.policies {
			if s.appliesTo(p, w) {
				keys = append(keys, pk)
			}
		}
		s.localPolicies[k] = keys
	}
	for pk := range s.dirtyPolicies {
		p := s.policies[pk]
		for k, keys := range s.localPolicies {
			if s.dirtyLocal[k] {
				continue // already matched against every policy
			}
			keys = removeKey(keys, pk)
			if p != nil && s.appliesTo(p, s.weps[k]) {
				keys = append(keys, pk)
			}
			s.localPolicies[k] = keys
		}
	}
	clear(s.dirtyLocal)
	clear(s.dirtyPolicies)
}

func removeKey(keys []rules.PolicyKey, k rules.PolicyKey) []rules.PolicyKey {
	for i, x := range keys {
		if x == k {
			return append(keys[:i:i], keys[i+1:]...)
		}
	}
	return keys
}

// orderedPolicies splits an endpoint's policies by direction into its
// tiers, in tier order; within a tier by order then name (policies without
// an order last), as Calico does.
func (s *State) orderedPolicies(keys []rules.PolicyKey) (in, out []rules.Tier) {
	ps := make([]*policy, 0, len(keys))
	for _, k := range keys {
		if p := s.policies[k]; p != nil {
			ps = append(ps, p)
		}
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].order != ps[j].order {
			return ps[i].order < ps[j].order
		}
		if ps[i].key.Name != ps[j].key.Name {
			return ps[i].key.Name < ps[j].key.Name
		}
		return ps[i].key.Namespace < ps[j].key.Namespace
	})
	return s.tiered(ps, true), s.tiered(ps, false)
}

// tierMemo is an endpoint's policies in tiers (orderedPolicies) as last
// computed, from its matching policies (the localPolicies slice, by
// identity) under policyEpoch: sorting and grouping every endpoint's
// policies again on every calculation made a pod's cost grow with the
// pods on the node (issue #25).
type tierMemo struct {
	first   *rules.PolicyKey // &keys[0]; nil for none
	n       int
	epoch   uint64
	call    uint64 // the Desired call that last used it
	in, out []rules.Tier
}

// endpointTiers is orderedPolicies(s.localPolicies[k]), reused from the
// last calculation when neither the endpoint's matching policies nor any
// policy or tier changed since; the memo is kept in place, marked with
// this calculation (forgetLocalEndpoints drops those it did not use).
func (s *State) endpointTiers(k string) (in, out []rules.Tier) {
	keys := s.localPolicies[k]
	m := tierMemo{n: len(keys), epoch: s.policyEpoch}
	if len(keys) > 0 {
		m.first = &keys[0]
	}
	if old, ok := s.tierMemos[k]; ok && old.first == m.first && old.n == m.n && old.epoch == m.epoch {
		m = old
	} else {
		m.in, m.out = s.orderedPolicies(keys)
	}
	m.call = s.desiredCalls
	s.tierMemos[k] = m
	return m.in, m.out
}

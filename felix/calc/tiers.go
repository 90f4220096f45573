package calc

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/store/api"
)

// tier is a Tier reduced to what ordering and rendering need.
type tier struct {
	name   string
	order  float64 // +Inf when unset: sorts last
	action api.Action
	known  bool // a Tier object exists (or it is one Calico always creates)
}

func (s *State) applyTier(u Update) {
	s.policyEpoch++ // every endpoint's tiers may order differently
	name := u.Key[strings.LastIndexByte(u.Key, '/')+1:]
	if u.Deleted {
		delete(s.tiers, name)
		return
	}
	if t, ok := u.Resource.(*api.Tier); ok {
		t.Default()
		s.tiers[name] = tierOf(t)
	}
}

func tierOf(t *api.Tier) *tier {
	out := &tier{name: t.Metadata.Name, order: math.Inf(1), action: t.Spec.DefaultAction, known: true}
	if t.Spec.Order != nil {
		out.order = *t.Spec.Order
	}
	return out
}

// tierNamed is the tier's current view. Calico's own tiers have their
// defaults until their object is seen; a tier with no object at all
// sorts after every known tier and drops what its policies leave
// undecided.
func (s *State) tierNamed(name string) *tier {
	if t, ok := s.tiers[name]; ok {
		return t
	}
	if t, ok := wellKnownTiers()[name]; ok {
		return t
	}
	return &tier{name: name, order: math.Inf(1), action: api.ActionDeny}
}

// wellKnownTiers are Calico's own tiers as it creates them, made once:
// every endpoint's tiers are looked up on every calculation, and each
// lookup of a tier whose object is not seen yet built the object anew.
// Shared: never changed.
var wellKnownTiers = sync.OnceValue(func() map[string]*tier {
	out := map[string]*tier{}
	for _, t := range api.WellKnownTiers() {
		out[t.Metadata.Name] = tierOf(t)
	}
	return out
})

// tierLess orders tiers: known before unknown, then by order (unset
// last), then by name.
func tierLess(a, b *tier) int {
	if a.known != b.known {
		if a.known {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(a.order, b.order), strings.Compare(a.name, b.name))
}

// tiered groups an endpoint's policies of one direction, already ordered
// within tiers, into its tiers in order. Tiers none of whose policies
// apply do not appear: they are skipped.
func (s *State) tiered(ordered []*policy, ingress bool) []rules.Tier {
	byTier := map[string]*rules.Tier{}
	var ts []*tier
	for _, p := range ordered {
		if (ingress && !p.ingress) || (!ingress && !p.egress) {
			continue
		}
		rt, ok := byTier[p.tier]
		if !ok {
			t := s.tierNamed(p.tier)
			ts = append(ts, t)
			rt = &rules.Tier{Name: t.name, DefaultAction: t.action}
			byTier[p.tier] = rt
		}
		rt.Policies = append(rt.Policies, p.key)
	}
	slices.SortFunc(ts, tierLess)
	out := make([]rules.Tier, len(ts))
	for i, t := range ts {
		out[i] = *byTier[t.name]
	}
	return out
}

package calc_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/store/api"
)

func tierObj(name string, ord *float64, action api.Action) *api.Tier {
	t := newObj("Tier").(*api.Tier)
	t.Metadata.Name = name
	t.Spec.Order, t.Spec.DefaultAction = ord, action
	return t
}

func inTier(tier string, p api.Resource) api.Resource {
	switch r := p.(type) {
	case *api.GlobalNetworkPolicy:
		r.Spec.Tier = tier
	case *api.NetworkPolicy:
		r.Spec.Tier = tier
	}
	return p
}

// tierLayout lists an endpoint chain's tier sections in order:
// "[tier]" at the start of a tier, its policies by name, "deny" for an
// end-of-tier drop.
func tierLayout(d calc.Desired, dir, iface string, known []rules.PolicyKey) []string {
	chain := rules.EndpointChainName("tw", iface)
	if dir == rules.DirEgress {
		chain = rules.EndpointChainName("fw", iface)
	}
	names := map[string]string{}
	for _, k := range known {
		names[rules.PolicyChainName(dir, k)] = k.Namespace + "/" + k.Name
	}
	var out []string
	for _, c := range d.Tables[4].Filter {
		if c.Name != chain {
			continue
		}
		for _, r := range c.Rules {
			switch {
			case strings.HasPrefix(r.Comment, "Start of tier "):
				out = append(out, "["+strings.TrimPrefix(r.Comment, "Start of tier ")+"]")
			case strings.HasPrefix(r.Comment, "End of tier "):
				out = append(out, "deny")
			case strings.HasPrefix(r.Action, "-j cali-pi-"), strings.HasPrefix(r.Action, "-j cali-po-"):
				n, ok := names[strings.TrimPrefix(r.Action, "-j ")]
				if !ok {
					n = "?" + r.Action
				}
				out = append(out, n)
			}
		}
	}
	return out
}

// Tiers order the endpoint's policies: by tier order (unset last, ties by
// name), Calico's own tiers with their defaults until their objects are
// seen, policies by order then name within a tier; a Pass tier has no
// end-of-tier drop; a tier that selects the endpoint not (in that
// direction) is left out. Moving a policy between tiers, changing a
// tier's order and action, and deleting a tier all take effect, and every
// step matches a state built from scratch.
func TestTiers(t *testing.T) {
	ds := datastore{}
	ds.put(t, pool("v4", "10.65.0.0/16", false))
	ds.put(t, profile("kns.prod", nil))
	ds.put(t, wep("prod", "a", thisNode, "calia", map[string]string{"app": "web"}, []string{"10.65.0.2/32"}, "kns.prod"))
	ds.put(t, wep("prod", "b", thisNode, "calib", map[string]string{"app": "db"}, []string{"10.65.0.3/32"}, "kns.prod"))
	ds.put(t, tierObj("security", order(100), ""))
	ds.put(t, tierObj("ops", order(100), api.ActionPass))
	ds.put(t, tierObj("zz-unordered", nil, ""))
	ds.put(t, tierObj("aa-unordered", nil, api.ActionPass))
	ds.put(t, inTier("security", gnp("sec-2", order(2), "all()", "", allow(), nil)))
	ds.put(t, inTier("security", gnp("sec-1b", order(1), "all()", "", allow(), nil)))
	ds.put(t, inTier("security", gnp("sec-1a", order(1), "app == 'web'", "", allow(), nil)))
	ds.put(t, inTier("ops", np("prod", "ops-web", nil, "app == 'web'", allow(), nil)))
	ds.put(t, inTier("zz-unordered", gnp("zz", nil, "all()", "", allow(), nil)))
	ds.put(t, inTier("aa-unordered", gnp("aa", nil, "app == 'web'", "", nil, allow(), api.PolicyTypeEgress)))
	ds.put(t, inTier(api.KubeAdminTierName, gnp("admin", order(1), "app == 'web'", "", allow(), nil)))
	ds.put(t, gnp("plain", order(1), "all()", "", allow(), nil))
	known := []rules.PolicyKey{{Name: "sec-2"}, {Name: "sec-1b"}, {Name: "sec-1a"}, {Namespace: "prod", Name: "ops-web"},
		{Name: "zz"}, {Name: "aa"}, {Name: "admin"}, {Name: "plain"}}
	expect := func(d calc.Desired, iface, dir string, want ...string) {
		t.Helper()
		if got := tierLayout(d, dir, iface, known); !slices.Equal(got, want) {
			t.Errorf("%s %s:\n got %v\nwant %v", iface, dir, got, want)
		}
	}

	inc := calc.NewState(thisNode)
	applyAll(inc, diff(t, datastore{}, ds))
	inc.Apply(calc.Update{InSync: true})
	d := checkFresh(t, "initial", inc, ds)
	// ops = security (100, ties by name) < kube-admin (1000, Pass, no
	// object yet) < default (1000000, no object yet) < unordered.
	expect(d, "calia", rules.DirIngress,
		"[ops]", "prod/ops-web",
		"[security]", "/sec-1a", "/sec-1b", "/sec-2", "deny",
		"[kube-admin]", "/admin",
		"[default]", "/plain", "deny",
		"[zz-unordered]", "/zz", "deny")
	expect(d, "calia", rules.DirEgress, "[aa-unordered]", "/aa")
	expect(d, "calib", rules.DirIngress,
		"[security]", "/sec-1b", "/sec-2", "deny",
		"[default]", "/plain", "deny",
		"[zz-unordered]", "/zz", "deny")
	expect(d, "calib", rules.DirEgress)

	// Move a policy to another tier; reorder and change a tier.
	next := ds.clone()
	next.put(t, inTier("ops", gnp("sec-2", order(2), "all()", "", allow(), nil)))
	next.put(t, tierObj("security", order(2_000_000), api.ActionPass))
	applyAll(inc, diff(t, ds, next))
	ds = next
	d = checkFresh(t, "moved and reordered", inc, ds)
	expect(d, "calia", rules.DirIngress,
		"[ops]", "/sec-2", "prod/ops-web",
		"[kube-admin]", "/admin",
		"[default]", "/plain", "deny",
		"[security]", "/sec-1a", "/sec-1b",
		"[zz-unordered]", "/zz", "deny")
	expect(d, "calib", rules.DirIngress,
		"[ops]", "/sec-2",
		"[default]", "/plain", "deny",
		"[security]", "/sec-1b",
		"[zz-unordered]", "/zz", "deny")

	// Calico's own tier objects override nothing they do not say; a
	// deleted tier that still has policies sorts last and denies.
	next = ds.clone()
	next.put(t, tierObj(api.KubeAdminTierName, nil, api.ActionDeny))
	next.remove("Tier", "", "ops")
	applyAll(inc, diff(t, ds, next))
	ds = next
	d = checkFresh(t, "kube-admin stored, ops deleted", inc, ds)
	expect(d, "calia", rules.DirIngress,
		"[kube-admin]", "/admin", "deny",
		"[default]", "/plain", "deny",
		"[security]", "/sec-1a", "/sec-1b",
		"[zz-unordered]", "/zz", "deny",
		"[ops]", "/sec-2", "prod/ops-web", "deny")
	if d.LocalPolicies != 8 {
		t.Errorf("local policies %d, want 8", d.LocalPolicies)
	}

	// A tier's only policy for an endpoint moving away leaves the tier out.
	next = ds.clone()
	next.put(t, inTier("security", gnp("sec-1b", order(1), "app == 'web'", "", allow(), nil)))
	applyAll(inc, diff(t, ds, next))
	ds = next
	d = checkFresh(t, "security no longer selects b", inc, ds)
	expect(d, "calib", rules.DirIngress,
		"[default]", "/plain", "deny",
		"[zz-unordered]", "/zz", "deny",
		"[ops]", "/sec-2", "deny")
}

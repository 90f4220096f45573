package calc_test

import (
	"slices"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/store/api"
)

// saWep is a pod endpoint running as service account sa, listing its
// namespace and account profiles as the CNI plugin writes them.
func saWep(ns, pod, node, iface, sa, ip string) *api.WorkloadEndpoint {
	w := wep(ns, pod, node, iface, map[string]string{api.LabelServiceAccount: sa}, []string{ip}, "kns."+ns, "ksa."+ns+"."+sa)
	w.Spec.ServiceAccountName = sa
	return w
}

// A policy's serviceAccountSelector narrows it to endpoints whose service
// account's labels (the pcsa. labels of profile ksa.<ns>.<sa>, plus
// projectcalico.org/name) match; a rule's serviceAccounts.selector matches
// peers the same way. Changing an account's labels re-matches both; an
// endpoint without an account matches no account selector. Every step is
// checked against a state built from scratch.
func TestServiceAccountSelectors(t *testing.T) {
	ds := datastore{}
	ds.put(t, pool("v4", "10.65.0.0/16", false))
	ds.put(t, profile("kns.prod", nil))
	ds.put(t, profile("ksa.prod.db", map[string]string{"pcsa.role": "database"}))
	ds.put(t, profile("ksa.prod.web", map[string]string{"pcsa.role": "frontend"}))
	ds.put(t, saWep("prod", "db", thisNode, "calidb", "db", "10.65.0.2/32"))
	ds.put(t, saWep("prod", "web", thisNode, "caliweb", "web", "10.65.0.3/32"))
	plain := wep("prod", "plain", thisNode, "caliplain", nil, []string{"10.65.0.4/32"}, "kns.prod")
	ds.put(t, plain)
	ds.put(t, saWep("prod", "remoteweb", "node2", "caliremote", "web", "10.65.1.2/32"))

	onlyDB := gnp("only-db", order(1), "all()", "", allow(), nil)
	onlyDB.Spec.ServiceAccountSelector = "role == 'database'"
	byName := np("prod", "by-name", order(2), "all()", allow(), nil)
	byName.Spec.ServiceAccountSelector = "projectcalico.org/name == 'web'"
	fromFront := gnp("from-frontend", order(3), "all()", "", []api.Rule{{Action: api.ActionAllow,
		Source: api.EntityRule{ServiceAccounts: &api.ServiceAccountMatch{Selector: "role == 'frontend'"}}}}, nil)
	ds.put(t, onlyDB)
	ds.put(t, byName)
	ds.put(t, fromFront)
	known := []rules.PolicyKey{{Name: "only-db"}, {Namespace: "prod", Name: "by-name"}, {Name: "from-frontend"}}
	frontendSet := rules.IPSetName(4, rules.IPSetSpec{Kind: rules.IPSetSelector, Selector: "all()", ServiceAccountSelector: "role == 'frontend'"})

	check := func(d calc.Desired, step string, want map[string][]string, members []string) {
		t.Helper()
		for iface, in := range want {
			if got := policyJumps(d, 4, rules.DirIngress, iface, known); !slices.Equal(got, in) {
				t.Errorf("%s: %s ingress policies %v, want %v", step, iface, got, in)
			}
		}
		set, ok := d.IPSets[frontendSet]
		if !ok {
			t.Fatalf("%s: no IP set %s for the rule's service-account selector", step, frontendSet)
		}
		if got := slices.Sorted(slices.Values(set.Members)); !slices.Equal(got, members) {
			t.Errorf("%s: frontend accounts' set %v, want %v", step, got, members)
		}
	}

	inc := calc.NewState(thisNode)
	applyAll(inc, diff(t, datastore{}, ds))
	inc.Apply(calc.Update{InSync: true})
	check(checkFresh(t, "initial", inc, ds), "initial", map[string][]string{
		"calidb":    {"only-db", "from-frontend"},
		"caliweb":   {"prod/by-name", "from-frontend"},
		"caliplain": {"from-frontend"},
	}, []string{"10.65.0.3/32", "10.65.1.2/32"})

	steps := []struct {
		name    string
		change  func(datastore)
		want    map[string][]string
		members []string
	}{
		{"account labels change", func(ds datastore) {
			ds.put(t, profile("ksa.prod.web", map[string]string{"pcsa.role": "database"}))
		}, map[string][]string{
			"calidb":  {"only-db", "from-frontend"},
			"caliweb": {"only-db", "prod/by-name", "from-frontend"},
		}, nil},
		{"account profile gone", func(ds datastore) {
			ds.remove("Profile", "", "ksa.prod.db")
		}, map[string][]string{
			"calidb":  {"from-frontend"},
			"caliweb": {"only-db", "prod/by-name", "from-frontend"},
		}, nil},
		{"pod changes account", func(ds datastore) {
			ds.put(t, profile("ksa.prod.fe", map[string]string{"pcsa.role": "frontend"}))
			ds.put(t, saWep("prod", "db", thisNode, "calidb", "fe", "10.65.0.2/32"))
		}, map[string][]string{
			"calidb":  {"from-frontend"},
			"caliweb": {"only-db", "prod/by-name", "from-frontend"},
		}, []string{"10.65.0.2/32"}},
	}
	prev := ds
	for _, s := range steps {
		next := prev.clone()
		s.change(next)
		applyAll(inc, diff(t, prev, next))
		check(checkFresh(t, s.name, inc, next), s.name, s.want, s.members)
		prev = next
	}
}

package e2e

import (
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// Tiers with real traffic: the agent has created Calico's own tiers; a
// Pass in tier "first" hands the decision to tier "second", which allows
// TCP and denies the rest;
// tier first's default Deny blocks what second would allow; a tier whose
// policies select the endpoint not is skipped; a defaultAction Pass lets
// the next tier decide; deleting a tier that still has policies is
// refused.
func TestPolicyTiers(t *testing.T) {
	t.Parallel()
	e, l := policyEnv(t, 70, "10.170.0.0/24", "")
	a, b, server := e.newPod(l, "a"), e.newPod(l, "b"), e.newPod(l, "server")
	e.label(a, map[string]string{"role": "a"})
	e.label(b, map[string]string{"role": "b"})
	e.label(server, map[string]string{"role": "server"})
	listenPeer(t, server.ns, hostPort(server.ip, 80))
	tcp := func(from pod) func() error { return tcpProbe(from.ns, hostPort(server.ip, 80)) }
	ping := func(from pod) func() error { return reachable(from.ns, server.ip) }
	expectTraffic(t, "open before any policy", allow("a->server", tcp(a)), allow("b->server", tcp(b)),
		allow("a ping", ping(a)))
	for _, name := range []string{api.DefaultTierName, api.KubeAdminTierName, api.KubeBaselineTierName} {
		getAs[*api.Tier](e, "Tier", "", name) // the agent created it
	}

	tier := func(name string, order float64, action api.Action) *api.Tier {
		tr := kindOf("Tier").NewObject().(*api.Tier)
		tr.Metadata.Name, tr.Spec.Order, tr.Spec.DefaultAction = name, &order, action
		return tr
	}
	inTier := func(tr string, p *api.GlobalNetworkPolicy) *api.GlobalNetworkPolicy { p.Spec.Tier = tr; return p }
	fromA := api.EntityRule{Selector: `role == "a"`}
	e.apply(tier("first", 10, api.ActionDeny))
	e.apply(tier("second", 20, api.ActionDeny))
	e.apply(inTier("second", gnp("allow-tcp", 1, `role == "server"`, []api.Rule{{Action: api.ActionAllow, Protocol: protoTCP()}}, nil)))
	e.apply(inTier("first", gnp("pass-a", 1, `role == "server"`, []api.Rule{{Action: api.ActionPass, Source: fromA}}, nil)))
	expectTraffic(t, "Pass in the first tier, the second allows TCP (and its default Deny ends ping); the first's default Deny blocks b",
		allow("a->server", tcp(a)), deny("a ping", ping(a)), deny("b->server", tcp(b)))

	// The first tier's policy now selects nothing: the tier is skipped.
	e.apply(inTier("first", gnp("pass-a", 1, `role == "nobody"`, []api.Rule{{Action: api.ActionPass, Source: fromA}}, nil)))
	expectTraffic(t, "a tier selecting the endpoint not is skipped",
		allow("a->server", tcp(a)), allow("b->server", tcp(b)), deny("b ping", ping(b)))

	// Selecting again, with defaultAction Pass: b falls through too.
	e.apply(inTier("first", gnp("pass-a", 1, `role == "server"`, []api.Rule{{Action: api.ActionPass, Source: fromA}}, nil)))
	expectTraffic(t, "the Deny tier blocks b again", allow("a->server", tcp(a)), deny("b->server", tcp(b)))
	e.apply(tier("first", 10, api.ActionPass))
	expectTraffic(t, "defaultAction Pass: the second tier decides",
		allow("a->server", tcp(a)), allow("b->server", tcp(b)), deny("b ping", ping(b)))

	// Back to Deny; then reorder: second (allow TCP) before first.
	e.apply(tier("first", 10, api.ActionDeny))
	expectTraffic(t, "first's default Deny again", allow("a->server", tcp(a)), deny("b->server", tcp(b)))
	e.apply(tier("second", 5, api.ActionDeny))
	expectTraffic(t, "second now comes first and allows both",
		allow("a->server", tcp(a)), allow("b->server", tcp(b)), deny("a ping", ping(a)))

	if _, err := e.cl.DeleteResource(t.Context(), kindOf("Tier"), "", "first", ""); err == nil {
		t.Error("deleting tier first, which has a policy, succeeded")
	}
}

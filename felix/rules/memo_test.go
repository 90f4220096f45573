package rules

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// TestEndpointMemoSameOutput: through a sequence of changes (an endpoint
// added, removed, its policies, tiers, profiles, addresses, QoS and
// spoofing prefixes changed, the configuration changed, the other IP
// version), Render with a memo gives exactly what Render without one
// gives, and reuses the chains of the endpoints that did not change.
func TestEndpointMemoSameOutput(t *testing.T) {
	in := bigInput(40, 30, 3)
	cfg := Config{}
	memo := &Memo{}
	check := func(step string, wantReused int) {
		t.Helper()
		want, wantSets := Render(cfg, in)
		in.Memo = memo
		reused := 0
		if memo.cfg != nil {
			old := map[string]memoEntry{}
			for k, e := range memo.eps {
				old[k] = e
			}
			defer func() {
				for k, e := range memo.eps {
					if o, ok := old[k]; ok && len(o.chains) > 0 && &o.chains[0] == &e.chains[0] {
						reused++
					}
				}
				if reused != wantReused {
					t.Errorf("%s: %d endpoints' chains reused, want %d", step, reused, wantReused)
				}
			}()
		}
		got, gotSets := Render(cfg, in)
		in.Memo = nil
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotSets, wantSets) {
			t.Fatalf("%s: Render with a memo differs from Render without", step)
		}
	}
	check("first", 0)
	check("nothing changed", 30)
	eps := in.Endpoints
	in.Endpoints = append(slices.Clone(eps), Endpoint{Iface: "caliextra", Addrs: []netip.Addr{netip.MustParseAddr("10.65.9.9")}})
	check("an endpoint added", 30)
	in.Endpoints = slices.Clone(eps[1:])
	check("two endpoints removed", 29)
	in.Endpoints[0].IngressPolicies = []PolicyKey{{Name: "pol-1"}}
	check("policies changed", 28)
	in.Endpoints[1].IngressTiers = []Tier{{Name: "security", DefaultAction: api.ActionPass, Policies: []PolicyKey{{Name: "pol-3"}}}}
	check("tiers changed", 28)
	in.Endpoints[2].Profiles = []string{"kns.ns-0", "kns.ns-1"}
	check("profiles changed", 28)
	in.Endpoints[3].Addrs = []netip.Addr{netip.MustParseAddr("10.65.1.1")}
	check("addresses changed", 28)
	in.Endpoints[4].QoS = &api.QoSControls{IngressPacketRate: 100, IngressPacketBurst: 5}
	check("QoS changed", 28)
	in.Endpoints[5].AllowSpoofedFrom = []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}
	check("spoofing prefixes changed", 28)
	cfg.DefaultEndpointToHostAction = "Accept"
	check("configuration changed (not used by endpoint chains, still forgets)", 0)
	cfg.FilterDenyAction = "REJECT"
	check("deny action changed", 0)
	check("nothing changed again", 29)
	cfg.IPVersion = 6
	check("IPv6", 0)
	for i := range 3 {
		in.Endpoints = append(in.Endpoints, Endpoint{Iface: fmt.Sprintf("calinew%d", i)})
	}
	check("three more", 29)
}

// BenchmarkRenderOneMoreEndpoint: a render after one endpoint joins 250
// (1,000 policies, 4 per endpoint), without and with the memo; the
// memo's render pays for the new endpoint's chains only.
func BenchmarkRenderOneMoreEndpoint(b *testing.B) {
	in := bigInput(1000, 251, 4)
	all := in.Endpoints
	for _, withMemo := range []bool{false, true} {
		b.Run(fmt.Sprintf("memo=%v", withMemo), func(b *testing.B) {
			in := in
			if withMemo {
				in.Memo = &Memo{}
			}
			for i := 0; b.Loop(); i++ {
				in.Endpoints = all[:250+i%2] // 250, then 251, then 250...
				Render(Config{}, in)
			}
		})
	}
}

// TestEndpointEqualCoversEveryField: changing any one field of an
// Endpoint makes endpointEqual false; a field added to Endpoint without
// being compared fails here.
func TestEndpointEqualCoversEveryField(t *testing.T) {
	base := Endpoint{Iface: "cali1", Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")},
		IngressTiers: []Tier{{Name: "default", Policies: []PolicyKey{{Name: "a"}}}}, EgressTiers: []Tier{{Name: "default"}},
		IngressPolicies: []PolicyKey{{Name: "a"}}, EgressPolicies: []PolicyKey{{Name: "b"}}, Profiles: []string{"p"},
		NATs:             []NAT{{Internal: netip.MustParseAddr("10.0.0.1"), External: netip.MustParseAddr("1.1.1.1")}},
		AllowSpoofedFrom: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}, QoS: &api.QoSControls{IngressBandwidth: 1}}
	if !endpointEqual(base, base) {
		t.Fatal("an endpoint differs from itself")
	}
	changes := map[string]func(*Endpoint){
		"Iface":            func(e *Endpoint) { e.Iface = "cali2" },
		"Addrs":            func(e *Endpoint) { e.Addrs = []netip.Addr{netip.MustParseAddr("10.0.0.2")} },
		"IngressTiers":     func(e *Endpoint) { e.IngressTiers = []Tier{{Name: "default", DefaultAction: api.ActionPass}} },
		"EgressTiers":      func(e *Endpoint) { e.EgressTiers = []Tier{{Name: "other"}} },
		"IngressPolicies":  func(e *Endpoint) { e.IngressPolicies = nil },
		"EgressPolicies":   func(e *Endpoint) { e.EgressPolicies = []PolicyKey{{Namespace: "x", Name: "b"}} },
		"Profiles":         func(e *Endpoint) { e.Profiles = []string{"q"} },
		"NATs":             func(e *Endpoint) { e.NATs = nil },
		"AllowSpoofedFrom": func(e *Endpoint) { e.AllowSpoofedFrom = nil },
		"QoS":              func(e *Endpoint) { e.QoS = &api.QoSControls{IngressBandwidth: 2} },
	}
	typ := reflect.TypeOf(Endpoint{})
	for i := range typ.NumField() {
		change, ok := changes[typ.Field(i).Name]
		if !ok {
			t.Errorf("Endpoint.%s: not covered by endpointEqual's test; compare it there", typ.Field(i).Name)
			continue
		}
		e := base
		change(&e)
		if endpointEqual(base, e) {
			t.Errorf("Endpoint.%s changed, yet endpointEqual says equal", typ.Field(i).Name)
		}
	}
	noQoS := base
	noQoS.QoS = nil
	if endpointEqual(base, noQoS) {
		t.Error("QoS nil and set compared equal")
	}
}

// TestRulesChainMemo: policy and profile chains come from the memo while
// their rules are the same slice, with the IP sets they name; a policy
// given new rules (a new slice, as the calculation does with a new
// version), a policy no longer used and a changed deny action are
// rendered again. Render with the memo always equals Render without.
func TestRulesChainMemo(t *testing.T) {
	in := bigInput(40, 30, 3)
	cfg := Config{}
	memo := &Memo{}
	chainOf := func(tb Tables, name string) iptables.Chain {
		for _, c := range tb.Filter {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no chain %s", name)
		return iptables.Chain{}
	}
	render := func(step string) Tables {
		t.Helper()
		want, wantSets := Render(cfg, in)
		in.Memo = memo
		got, gotSets := Render(cfg, in)
		in.Memo = nil
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotSets, wantSets) {
			t.Fatalf("%s: Render with a memo differs from Render without", step)
		}
		return got
	}
	k1 := PolicyKey{Name: "pol-1"}
	name := PolicyChainName(DirIngress, k1)
	first := chainOf(render("first"), name)
	again := chainOf(render("nothing changed"), name)
	if &first.Rules[0] != &again.Rules[0] {
		t.Fatal("unchanged policy chain rendered again")
	}
	p := in.Policies[k1]
	p.Ingress = []api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{Selector: "app == 'other'"}}}
	in.Policies[k1] = p
	changed := chainOf(render("rules replaced"), name)
	if &changed.Rules[0] == &again.Rules[0] || len(memo.rules) == 0 {
		t.Fatal("replaced rules not rendered again")
	}
	before := len(memo.rules)
	for i := range in.Endpoints {
		in.Endpoints[i].IngressPolicies = nil
	}
	render("ingress policies dropped")
	if len(memo.rules) >= before {
		t.Fatalf("memo kept %d chains after the ingress policies went, had %d", len(memo.rules), before)
	}
	cfg.FilterDenyAction = "REJECT"
	render("deny action changed")
}

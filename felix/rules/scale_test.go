package rules

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// bigInput is nPol policies (half namespaced over 10 namespaces, half
// global) and nEp endpoints with perEp policies each, both directions.
func bigInput(nPol, nEp, perEp int) Input {
	in := Input{Policies: map[PolicyKey]Policy{}, Profiles: map[string]Profile{}}
	keys := make([]PolicyKey, nPol)
	for i := range keys {
		k := PolicyKey{Name: fmt.Sprintf("pol-%d", i)}
		if i%2 == 0 {
			k.Namespace = fmt.Sprintf("ns-%d", i%10)
		}
		keys[i] = k
		in.Policies[k] = Policy{Key: k,
			Ingress: []api.Rule{
				{Action: api.ActionAllow, Protocol: proto("TCP"),
					Source:      api.EntityRule{Selector: fmt.Sprintf("app == 'app-%d'", i%50)},
					Destination: api.EntityRule{Ports: portList("80", "443", "8000:8100")}},
				{Action: api.ActionDeny, Source: api.EntityRule{Nets: []string{"10.0.0.0/8", "fd00::/8"}}},
			},
			Egress: []api.Rule{
				{Action: api.ActionAllow, Protocol: proto("UDP"), Destination: api.EntityRule{NamespaceSelector: "kubernetes.io/metadata.name == 'kube-system'", Ports: portList("53", "dns")}},
				{Action: api.ActionPass, Destination: api.EntityRule{NotNets: []string{"10.96.0.0/12", "192.168.0.0/16"}}},
			}}
	}
	for n := range 10 {
		name := fmt.Sprintf("kns.ns-%d", n)
		in.Profiles[name] = Profile{Name: name, Ingress: []api.Rule{{Action: api.ActionAllow}}, Egress: []api.Rule{{Action: api.ActionAllow}}}
	}
	eps := manyEndpoints(nEp)
	for i := range eps {
		var pols []PolicyKey
		for k := range perEp {
			pols = append(pols, keys[(i*perEp+k*7)%nPol])
		}
		eps[i].IngressPolicies, eps[i].EgressPolicies = pols, pols
		eps[i].Profiles = []string{fmt.Sprintf("kns.ns-%d", i%10)}
		eps[i].Addrs = append(eps[i].Addrs, ip(fmt.Sprintf("fd00:65::%x", i+1)))
	}
	in.Endpoints = eps
	return in
}

func countRules(chains []iptables.Chain) (n int) {
	for _, c := range chains {
		n += len(c.Rules)
	}
	return n
}

func TestDeterministic(t *testing.T) {
	in := bigInput(100, 40, 4)
	a, sa := Render(Config{}, in)
	b, sb := Render(Config{}, in)
	if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(sa, sb) {
		t.Fatal("two renders of the same input differ")
	}
	// Same content given in another order: endpoints shuffled, maps
	// rebuilt (Go randomises their iteration anyway).
	sh := Input{Policies: map[PolicyKey]Policy{}, Profiles: map[string]Profile{}}
	sh.Endpoints = append(sh.Endpoints, in.Endpoints...)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(sh.Endpoints), func(i, j int) { sh.Endpoints[i], sh.Endpoints[j] = sh.Endpoints[j], sh.Endpoints[i] })
	for k, v := range in.Policies {
		sh.Policies[k] = v
	}
	for k, v := range in.Profiles {
		sh.Profiles[k] = v
	}
	c, sc := Render(Config{}, sh)
	if dump(a) != dump(c) || dumpSets(sa) != dumpSets(sc) {
		t.Fatal("shuffled input renders differently")
	}
}

// TestInvariants checks, on a large input and both IP versions, that
// names fit the kernel's limits, every jump has a target, and the IP sets
// listed are exactly those the rules use.
func TestInvariants(t *testing.T) {
	in := bigInput(200, 60, 4)
	for _, v := range []int{4, 6} {
		tb, specs := Render(Config{IPVersion: v}, in)
		listed := map[string]bool{}
		for _, s := range specs {
			if len(s.Name) > MaxIPSetName || s.Name != IPSetName(v, s) {
				t.Errorf("v%d: set %q", v, s.Name)
			}
			listed[s.Name] = true
		}
		used := map[string]bool{}
		for _, table := range [][]iptables.Chain{tb.Filter, tb.NAT, tb.Mangle, tb.Raw} {
			names := map[string]bool{}
			for _, c := range table {
				if names[c.Name] || len(c.Name) > MaxChainName || !strings.HasPrefix(c.Name, "cali-") {
					t.Errorf("v%d: bad or duplicate chain %q", v, c.Name)
				}
				names[c.Name] = true
			}
			for _, c := range table {
				for _, r := range c.Rules {
					f := strings.Fields(r.Action)
					if (f[0] == "-j" || f[0] == "-g") && strings.HasPrefix(f[1], "cali-") && !names[f[1]] {
						t.Errorf("v%d: %s jumps to missing %s", v, c.Name, f[1])
					}
					mf := strings.Fields(r.Match)
					for i, w := range mf {
						if w == "--match-set" {
							used[mf[i+1]] = true
						}
					}
				}
			}
		}
		if !reflect.DeepEqual(used, listed) {
			t.Errorf("v%d: sets used %d, listed %d", v, len(used), len(listed))
		}
	}
}

// TestLinear: endpoints only jump to policy chains, so more endpoints
// sharing the same policies add only their own chains' rules.
func TestLinear(t *testing.T) {
	policyRules := func(tb Tables) (n int) {
		for _, c := range tb.Filter {
			if strings.HasPrefix(c.Name, "cali-pi-") || strings.HasPrefix(c.Name, "cali-po-") {
				n += len(c.Rules)
			}
		}
		return n
	}
	small, _ := Render(Config{}, bigInput(50, 50, 4))
	big, _ := Render(Config{}, bigInput(50, 500, 4))
	if a, b := policyRules(small), policyRules(big); a != b {
		t.Errorf("policy rules %d with 50 endpoints, %d with 500", a, b)
	}
	perEp := (countRules(big.Filter) - countRules(small.Filter)) / 450
	if perEp > 60 {
		t.Errorf("%d rules per extra endpoint", perEp)
	}
}

func BenchmarkRender1000Policies250Endpoints(b *testing.B) {
	in := bigInput(1000, 250, 4)
	var tb Tables
	var sets []IPSetSpec
	for b.Loop() {
		tb, sets = Render(Config{}, in)
	}
	b.ReportMetric(float64(countRules(tb.Filter)+countRules(tb.NAT)), "rules")
	b.ReportMetric(float64(len(tb.Filter)+len(tb.NAT)), "chains")
	b.ReportMetric(float64(len(sets)), "ipsets")
}

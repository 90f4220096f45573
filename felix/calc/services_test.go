package calc_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// service publishes a Service's endpoints as the controller does; no
// slices removes them.
func (ds datastore) service(t testing.TB, ns, name string, slices ...store.ServiceSlice) {
	t.Helper()
	key := etcdv3.ServiceEndpointsKey(ns, name)
	if len(slices) == 0 {
		delete(ds, key)
		return
	}
	v, err := (&store.ServiceEndpoints{Namespace: ns, Name: name, Slices: slices}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	ds[key] = v
}

// Rule services matches: source.services is an IP set of the Service's
// endpoint addresses, destination.services one of address,protocol:port
// (each address with each port of its own slice); both follow the
// published endpoints, are empty (match nothing) without them, and the
// namespace defaults to the policy's. Every step is checked against a
// state built from scratch.
func TestServiceIPSets(t *testing.T) {
	ds := datastore{}
	ds.put(t, pool("v4", "10.65.0.0/16", false))
	ds.put(t, pool("v6", "fd00::/64", false))
	ds.put(t, wep("prod", "client", thisNode, "caliclient", nil, []string{"10.65.0.2/32", "fd00::2/128"}))
	pol := np("prod", "svc", order(1), "all()",
		[]api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{Services: &api.ServiceMatch{Name: "web"}}}},
		[]api.Rule{{Action: api.ActionAllow, Destination: api.EntityRule{Services: &api.ServiceMatch{Name: "dns", Namespace: "kube-system"}}}})
	ds.put(t, pol)

	webV4 := rules.IPSetName(4, rules.IPSetSpec{Kind: rules.IPSetService, Service: "prod/web"})
	webV6 := rules.IPSetName(6, rules.IPSetSpec{Kind: rules.IPSetService, Service: "prod/web"})
	dnsV4 := rules.IPSetName(4, rules.IPSetSpec{Kind: rules.IPSetServicePorts, Service: "kube-system/dns"})
	inc := fresh(t, ds, 0)
	prev := ds.clone()
	step := func(name string, want map[string][]string) {
		t.Helper()
		applyAll(inc, diff(t, prev, ds))
		prev = ds.clone()
		d := checkFresh(t, name, inc, ds)
		for set, members := range want {
			s, ok := d.IPSets[set]
			if !ok {
				t.Fatalf("%s: no IP set %s", name, set)
			}
			if !slices.Equal(s.Members, members) {
				t.Errorf("%s: %s members %v, want %v", name, set, s.Members, members)
			}
		}
		if typ := d.IPSets[dnsV4].Type; typ != "hash:ip,port" {
			t.Errorf("%s: destination service set type %q", name, typ)
		}
		if typ := d.IPSets[webV4].Type; typ != "hash:net" {
			t.Errorf("%s: source service set type %q", name, typ)
		}
		text := dump(d)
		for _, m := range []string{"--match-set " + webV4 + " src", "--match-set " + webV6 + " src", "--match-set " + dnsV4 + " dst,dst"} {
			if !strings.Contains(text, m) {
				t.Errorf("%s: no rule matches %q", name, m)
			}
		}
	}

	step("nothing published: empty sets", map[string][]string{webV4: nil, webV6: nil, dnsV4: nil})

	ds.service(t, "prod", "web", store.ServiceSlice{Name: "web-1", Addresses: []string{"10.65.0.5", "fd00::5"},
		Ports: []store.ServicePort{{Protocol: "TCP", Port: 80}}})
	ds.service(t, "kube-system", "dns",
		store.ServiceSlice{Name: "dns-1", Addresses: []string{"10.96.0.10", "10.96.0.11"},
			Ports: []store.ServicePort{{Protocol: "UDP", Port: 53}, {Protocol: "TCP", Port: 53}}},
		store.ServiceSlice{Name: "dns-2", Addresses: []string{"10.96.0.12"}, Ports: []store.ServicePort{{Protocol: "TCP", Port: 9153}}})
	ds.service(t, "other", "web", store.ServiceSlice{Name: "x", Addresses: []string{"10.65.9.9"}}) // another namespace's web
	step("published", map[string][]string{
		webV4: {"10.65.0.5/32"}, webV6: {"fd00::5/128"},
		dnsV4: {"10.96.0.10,tcp:53", "10.96.0.10,udp:53", "10.96.0.11,tcp:53", "10.96.0.11,udp:53", "10.96.0.12,tcp:9153"},
	})

	ds.service(t, "prod", "web", store.ServiceSlice{Name: "web-1", Addresses: []string{"10.65.0.6", "10.65.0.7"}})
	ds.service(t, "kube-system", "dns", store.ServiceSlice{Name: "dns-2", Addresses: []string{"10.96.0.12"}})
	step("endpoints changed (dns: no port left)", map[string][]string{
		webV4: {"10.65.0.6/32", "10.65.0.7/32"}, webV6: nil, dnsV4: nil,
	})

	ds.service(t, "kube-system", "dns", store.ServiceSlice{Name: "dns-3", Addresses: []string{"10.96.0.13"},
		Ports: []store.ServicePort{{Protocol: "SCTP", Port: 7}}})
	ds.service(t, "prod", "web")
	step("web withdrawn, dns moved", map[string][]string{webV4: nil, webV6: nil, dnsV4: {"10.96.0.13,sctp:7"}})
}

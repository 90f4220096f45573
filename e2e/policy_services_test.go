package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// Rule services matches with real traffic (issue #13): a Service's
// endpoints come from its EndpointSlices in a real kube-apiserver, the
// policy controller in calico-node publishes them, the agent matches
// source.services by the endpoints' addresses and destination.services by
// their addresses and ports, and the verdicts follow the slices as they
// change.
//
// Helpers for other tests: PublishServiceEndpoints writes a Service's
// endpoints straight to the datastore, as the controller would (for
// clusters whose nodes cannot reach a kube-apiserver); ApplyEndpointSlice
// and DeleteEndpointSlice change the slices in a kube-apiserver, for an
// agent or controller that watches it.

// ServiceSlice is one EndpointSlice of a Service: its addresses and ports
// (TCP).
type ServiceSlice struct {
	Name      string
	Addresses []string
	Ports     []int
}

// storeSlices is slices as the controller publishes them.
func storeSlices(sls []ServiceSlice) []store.ServiceSlice {
	out := []store.ServiceSlice{}
	for _, s := range sls {
		ss := store.ServiceSlice{Name: s.Name, Addresses: append([]string{}, slices.Sorted(slices.Values(s.Addresses))...)}
		for _, p := range slices.Sorted(slices.Values(s.Ports)) {
			ss.Ports = append(ss.Ports, store.ServicePort{Protocol: "TCP", Port: uint16(p)})
		}
		out = append(out, ss)
	}
	slices.SortFunc(out, func(a, b store.ServiceSlice) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// PublishServiceEndpoints makes the datastore's endpoints of Service
// namespace/name the given slices, as the Kubernetes controller publishes
// them (etcdv3.ServiceEndpointsKey); no slices withdraws them. A running
// controller owns these keys and would undo this: use it where none runs.
func PublishServiceEndpoints(tb testing.TB, cl *store.Client, namespace, name string, sls ...ServiceSlice) {
	tb.Helper()
	key := etcdv3.ServiceEndpointsKey(namespace, name)
	raw := storetest.Raw(tb, cl)
	cur, err := raw.GetKey(ctxBG, key)
	exists := err == nil
	if err != nil && !isNotFound(err) {
		tb.Fatalf("reading %s: %v", key, err)
	}
	if len(sls) == 0 {
		if exists {
			if err := raw.DeleteKey(ctxBG, key, cur.Revision); err != nil {
				tb.Fatalf("withdrawing the endpoints of %s/%s: %v", namespace, name, err)
			}
		}
		return
	}
	val, err := (&store.ServiceEndpoints{Namespace: namespace, Name: name, Slices: storeSlices(sls)}).Encode()
	if err != nil {
		tb.Fatal(err)
	}
	if exists {
		_, err = raw.UpdateKey(ctxBG, key, val, cur.Revision)
	} else {
		_, err = raw.CreateKey(ctxBG, key, val)
	}
	if err != nil {
		tb.Fatalf("publishing the endpoints of %s/%s: %v", namespace, name, err)
	}
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

// endpointSlicePath is where namespace's EndpointSlices live in the API.
func endpointSlicePath(namespace string) string {
	return "/apis/discovery.k8s.io/v1/namespaces/" + namespace + "/endpointslices"
}

// ApplyEndpointSlice creates or replaces EndpointSlice s of Service
// namespace/service in a kube-apiserver (IPv4, TCP ports).
func ApplyEndpointSlice(tb testing.TB, kapi *kubeapi.Server, namespace, service string, s ServiceSlice) {
	tb.Helper()
	eps := []any{}
	for _, a := range s.Addresses {
		eps = append(eps, map[string]any{"addresses": []string{a}})
	}
	ports := []any{}
	for _, p := range s.Ports {
		ports = append(ports, map[string]any{"protocol": "TCP", "port": p})
	}
	obj := map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
		"metadata":    map[string]any{"name": s.Name, "namespace": namespace, "labels": map[string]string{k8s.LabelServiceName: service}},
		"addressType": "IPv4", "endpoints": eps, "ports": ports}
	path := endpointSlicePath(namespace)
	code, body := kapi.Do(tb, http.MethodPut, path+"/"+s.Name, obj)
	if code == http.StatusNotFound {
		code, body = kapi.Do(tb, http.MethodPost, path, obj)
	}
	if code != http.StatusOK && code != http.StatusCreated {
		tb.Fatalf("applying EndpointSlice %s/%s: %d %s", namespace, s.Name, code, body)
	}
}

// DeleteEndpointSlice deletes EndpointSlice namespace/name from a
// kube-apiserver.
func DeleteEndpointSlice(tb testing.TB, kapi *kubeapi.Server, namespace, name string) {
	tb.Helper()
	if code, body := kapi.Do(tb, http.MethodDelete, endpointSlicePath(namespace)+"/"+name, nil); code != http.StatusOK {
		tb.Fatalf("deleting EndpointSlice %s/%s: %d %s", namespace, name, code, body)
	}
}

// publishedAs is nil when the datastore holds exactly what
// PublishServiceEndpoints would write for these slices (none: no key).
func publishedAs(cl *store.Client, namespace, name string, sls ...ServiceSlice) func() error {
	return func() error {
		raw, ok := etcdv3.Of(cl.Backend)
		if !ok {
			return fmt.Errorf("service endpoint copies live in etcd only")
		}
		kv, err := raw.GetKey(ctxBG, etcdv3.ServiceEndpointsKey(namespace, name))
		if len(sls) == 0 {
			if isNotFound(err) {
				return nil
			}
			return fmt.Errorf("endpoints of %s/%s still published (%v)", namespace, name, err)
		}
		if err != nil {
			return err
		}
		want, err := (&store.ServiceEndpoints{Namespace: namespace, Name: name, Slices: storeSlices(sls)}).Encode()
		if err != nil {
			return err
		}
		if !bytes.Equal(kv.Value, want) {
			return fmt.Errorf("published %s, want %s", kv.Value, want)
		}
		return nil
	}
}

// TestPolicyServicesTraffic: pods srv, db, a, b and c in namespace svc on
// one node, each listening on TCP 80 and 81. Policy from-clients lets
// into srv only what comes from Service "clients" (source.services, the
// namespace defaulting to the policy's); policy to-backend lets c send
// only to Service "backend" (destination.services: its endpoints'
// addresses on their slice's ports). The Services' EndpointSlices change
// in the kube-apiserver at every step; the controller in calico-node
// publishes them, and the whole table (5 pods x 4 peers x 2 ports) is
// checked with TCP connections. With no endpoints, both match nothing.
func TestPolicyServicesTraffic(t *testing.T) {
	t.Parallel()
	e := newKubeCNIEnv(t, 77)
	e.pool("svc", "10.163.0.0/24")
	l := e.conflist(e.kubeconfig, "", `{"type":"calico-ipam","ipv4_pools":["svc"]}`)
	const ns = "svc"
	kpNamespace(t, e, ns, nil)
	tab := &kpTable{ports: []int{80, 81}}
	pods := map[string]*kpPod{}
	for _, name := range []string{"srv", "db", "a", "b", "c"} {
		p := kpAddPod(t, e, l, ns, name, "", map[string]string{"app": name}, nil)
		for _, port := range tab.ports {
			listenPeer(t, p.net.ns, fmt.Sprintf(":%d", port))
		}
		pods[name] = p
		tab.pods = append(tab.pods, p)
	}
	ip := func(name string) string { return pods[name].net.ip }
	for _, svc := range []string{"clients", "backend"} {
		e.create(t, "/api/v1/namespaces/"+ns+"/services", map[string]any{"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": svc},
			"spec":     map[string]any{"ports": []any{map[string]any{"port": 8080, "targetPort": 80}}}})
	}
	e.startAgent("node1", "--kube-controllers-kubeconfig", e.kubeconfig)

	fromClients := kindOf("NetworkPolicy").NewObject().(*api.NetworkPolicy)
	fromClients.Metadata.Namespace, fromClients.Metadata.Name = ns, "from-clients"
	fromClients.Spec.Selector, fromClients.Spec.Types = "app == 'srv'", []api.PolicyType{api.PolicyTypeIngress}
	fromClients.Spec.Ingress = []api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{Services: &api.ServiceMatch{Name: "clients"}}}}
	toBackend := kindOf("NetworkPolicy").NewObject().(*api.NetworkPolicy)
	toBackend.Metadata.Namespace, toBackend.Metadata.Name = ns, "to-backend"
	toBackend.Spec.Selector, toBackend.Spec.Types = "app == 'c'", []api.PolicyType{api.PolicyTypeEgress}
	toBackend.Spec.Egress = []api.Rule{{Action: api.ActionAllow, Protocol: protoTCP(),
		Destination: api.EntityRule{Services: &api.ServiceMatch{Name: "backend", Namespace: ns}}}}
	for _, p := range []*api.NetworkPolicy{fromClients, toBackend} {
		if _, err := e.cl.CreateResource(ctxBG, p); err != nil {
			t.Fatalf("creating policy %s: %v", p.Metadata.Name, err)
		}
	}

	is := func(p *kpPod, name string) bool { return p.name == name }
	// allowed is the table for the given client addresses of srv and the
	// (pod, port) pairs c may reach.
	allowed := func(clients []string, backend map[string][]int) func(from, to *kpPod, port int) bool {
		return func(from, to *kpPod, port int) bool {
			if is(from, "c") && !slices.Contains(backend[to.name], port) {
				return false
			}
			if is(to, "srv") && !slices.Contains(clients, from.name) {
				return false
			}
			return true
		}
	}
	steps := []struct {
		name             string
		clients, backend []ServiceSlice
		allowed          func(from, to *kpPod, port int) bool
	}{
		{"no endpoints: both services match nothing", nil, nil,
			allowed(nil, nil)},
		{"clients = a; backend = db:80", []ServiceSlice{{"clients-1", []string{ip("a")}, []int{80}}},
			[]ServiceSlice{{"backend-1", []string{ip("db")}, []int{80}}},
			allowed([]string{"a"}, map[string][]int{"db": {80}})},
		{"clients = b (a's slice replaced); backend = db:81", []ServiceSlice{{"clients-1", []string{ip("b")}, []int{80}}},
			[]ServiceSlice{{"backend-1", []string{ip("db")}, []int{81}}},
			allowed([]string{"b"}, map[string][]int{"db": {81}})},
		{"clients = b, c (two slices); backend = db:81 and srv:80 (ports per slice)",
			[]ServiceSlice{{"clients-1", []string{ip("b")}, []int{80}}, {"clients-2", []string{ip("c")}, nil}},
			[]ServiceSlice{{"backend-1", []string{ip("db")}, []int{81}}, {"backend-2", []string{ip("srv")}, []int{80}}},
			allowed([]string{"b", "c"}, map[string][]int{"db": {81}, "srv": {80}})},
		{"slices deleted: both match nothing again", nil, nil,
			allowed(nil, nil)},
	}
	applied := map[string]map[string]bool{"clients": {}, "backend": {}} // slices in the API
	set := func(svc string, sls []ServiceSlice) {
		want := map[string]bool{}
		for _, s := range sls {
			ApplyEndpointSlice(t, e.api, ns, svc, s)
			want[s.Name] = true
		}
		for name := range applied[svc] {
			if !want[name] {
				DeleteEndpointSlice(t, e.api, ns, name)
			}
		}
		applied[svc] = want
	}
	var prev []bool
	for i, s := range steps {
		want := tab.want(s.allowed)
		if slices.Equal(want, prev) {
			t.Fatalf("step %d (%s): its table is the previous step's, so it would pass unchanged", i, s.name)
		}
		prev = want
		what := fmt.Sprintf("step %d: %s", i, s.name)
		set("clients", s.clients)
		set("backend", s.backend)
		eventually(t, kpTimeout, what+": clients published", publishedAs(e.cl, ns, "clients", s.clients...))
		eventually(t, kpTimeout, what+": backend published", publishedAs(e.cl, ns, "backend", s.backend...))
		took := tab.expect(t, what, want, kpTimeout)
		t.Logf("%s: traffic as expected after %v", what, took.Round(time.Millisecond))
	}
}

// TestPolicyServicesPublished: with no kube-apiserver (as in the
// multi-node harness), PublishServiceEndpoints alone drives the match:
// into srv only from Service "clients", whose endpoints move from a to b
// and are then withdrawn.
func TestPolicyServicesPublished(t *testing.T) {
	t.Parallel()
	e, l := policyEnv(t, 78, "10.164.0.0/24", "")
	srv, a, b := e.k8sPod(l, "svc", "srv"), e.k8sPod(l, "svc", "a"), e.k8sPod(l, "svc", "b")
	e.label(srv, map[string]string{"app": "srv"})
	listenPeer(t, srv.ns, ":80")
	p := kindOf("NetworkPolicy").NewObject().(*api.NetworkPolicy)
	p.Metadata.Namespace, p.Metadata.Name = "svc", "from-clients"
	p.Spec.Selector, p.Spec.Types = "app == 'srv'", []api.PolicyType{api.PolicyTypeIngress}
	p.Spec.Ingress = []api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{Services: &api.ServiceMatch{Name: "clients"}}}}
	e.apply(p)
	to := hostPort(srv.ip, 80)
	expectTraffic(t, "nothing published: nothing allowed in", deny("a", tcpProbe(a.ns, to)), deny("b", tcpProbe(b.ns, to)))
	PublishServiceEndpoints(t, e.cl, "svc", "clients", ServiceSlice{Name: "clients-1", Addresses: []string{a.ip}})
	expectTraffic(t, "clients = a", allow("a", tcpProbe(a.ns, to)), deny("b", tcpProbe(b.ns, to)))
	PublishServiceEndpoints(t, e.cl, "svc", "clients", ServiceSlice{Name: "clients-1", Addresses: []string{b.ip}})
	expectTraffic(t, "clients = b", deny("a", tcpProbe(a.ns, to)), allow("b", tcpProbe(b.ns, to)))
	PublishServiceEndpoints(t, e.cl, "svc", "clients")
	expectTraffic(t, "withdrawn", deny("a", tcpProbe(a.ns, to)), deny("b", tcpProbe(b.ns, to)))
}

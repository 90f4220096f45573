package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/etcdv3"
	"github.com/calico-aio/calico-aio/store/storetest"
)

func ptr[T any](v T) *T { return &v }

// slice is an EndpointSlice of service svc in namespace ns.
func slice(ns, name, svc, addrType string, addrs []string, ports ...k8s.EndpointPort) k8s.EndpointSlice {
	es := k8s.EndpointSlice{Metadata: k8s.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}},
		AddressType: addrType, Ports: ports}
	if svc != "" {
		es.Metadata.Labels[k8s.LabelServiceName] = svc
	}
	for _, a := range addrs {
		es.Endpoints = append(es.Endpoints, k8s.Endpoint{Addresses: []string{a}})
	}
	return es
}

func TestServiceEndpointsGrouping(t *testing.T) {
	got := serviceEndpoints([]k8s.EndpointSlice{
		slice("shop", "web-b", "web", "IPv4", []string{"10.0.0.3", "10.0.0.2", "10.0.0.2"},
			k8s.EndpointPort{Name: ptr("http"), Port: ptr[int32](8080)},
			k8s.EndpointPort{Protocol: ptr("UDP"), Port: ptr[int32](53)},
			k8s.EndpointPort{Name: ptr("any")}), // no number: adds nothing
		slice("shop", "web-a", "web", "IPv6", []string{"fd00::0001"}, k8s.EndpointPort{Protocol: ptr("SCTP"), Port: ptr[int32](9)}),
		slice("shop", "web-fqdn", "web", "FQDN", []string{"example.com"}, k8s.EndpointPort{Port: ptr[int32](80)}),
		slice("shop", "orphan", "", "IPv4", []string{"10.0.0.9"}), // no service label
		slice("other", "web-x", "web", "IPv4", nil),               // no endpoints
	})
	want := map[string]*store.ServiceEndpoints{
		"/calico/aio/v1/services/shop/web": {Namespace: "shop", Name: "web", Slices: []store.ServiceSlice{
			{Name: "web-a", Addresses: []string{"fd00::1"}, Ports: []store.ServicePort{{Protocol: "SCTP", Port: 9}}},
			{Name: "web-b", Addresses: []string{"10.0.0.2", "10.0.0.3"}, Ports: []store.ServicePort{
				{Name: "http", Protocol: "TCP", Port: 8080}, {Protocol: "UDP", Port: 53}}},
		}},
		"/calico/aio/v1/services/other/web": {Namespace: "other", Name: "web", Slices: []store.ServiceSlice{
			{Name: "web-x", Addresses: []string{}}}},
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("got %s\nwant %s", g, w)
	}
}

// published reads the endpoints published for ns/name (nil when none).
func published(t *testing.T, cl *store.Client, ns, name string) (*store.ServiceEndpoints, int64) {
	t.Helper()
	kv, err := storetest.Raw(t, cl).GetKey(context.Background(), etcdv3.ServiceEndpointsKey(ns, name))
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	se, err := store.ParseServiceEndpoints(kv.Key, kv.Value)
	if err != nil {
		t.Fatal(err)
	}
	return se, kv.Revision
}

func TestSyncServices(t *testing.T) {
	ctx := context.Background()
	cl := storetest.StartEtcd(t).Client(t)
	f := &fakeKube{eps: []k8s.EndpointSlice{slice("shop", "web-1", "web", "IPv4", []string{"10.0.0.1"}, k8s.EndpointPort{Port: ptr[int32](80)})}}
	c := newController(cl, f)
	c.Logf = t.Logf
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	se, rev := published(t, cl, "shop", "web")
	if se == nil || len(se.Slices) != 1 || !reflect.DeepEqual(se.Slices[0].Addresses, []string{"10.0.0.1"}) ||
		!reflect.DeepEqual(se.Slices[0].Ports, []store.ServicePort{{Protocol: "TCP", Port: 80}}) {
		t.Fatalf("published %+v", se)
	}

	// Nothing changed: nothing written.
	if err := c.syncServices(ctx); err != nil {
		t.Fatal(err)
	}
	if _, r := published(t, cl, "shop", "web"); r != rev {
		t.Errorf("unchanged endpoints rewritten: revision %d -> %d", rev, r)
	}

	// The endpoints change: the value follows.
	f.set(func(f *fakeKube) {
		f.eps = []k8s.EndpointSlice{slice("shop", "web-1", "web", "IPv4", []string{"10.0.0.2"}, k8s.EndpointPort{Port: ptr[int32](80)})}
	})
	if err := c.syncServices(ctx); err != nil {
		t.Fatal(err)
	}
	if se, _ := published(t, cl, "shop", "web"); se == nil || !reflect.DeepEqual(se.Slices[0].Addresses, []string{"10.0.0.2"}) {
		t.Fatalf("after the change: %+v", se)
	}

	// A failed list deletes nothing.
	f.set(func(f *fakeKube) { f.listSlicesErr = errors.New("boom") })
	if err := c.syncServices(ctx); err == nil {
		t.Fatal("sync with a failing list succeeded")
	}
	if se, _ := published(t, cl, "shop", "web"); se == nil {
		t.Fatal("a failed list deleted the endpoints")
	}

	// No slice left: the key goes.
	f.set(func(f *fakeKube) { f.listSlicesErr, f.eps = nil, nil })
	if err := c.syncServices(ctx); err != nil {
		t.Fatal(err)
	}
	if se, _ := published(t, cl, "shop", "web"); se != nil {
		t.Fatalf("endpoints of a service without slices still published: %+v", se)
	}
}

// TestServiceEndpointsFromKubeAPI runs the controller against a real
// kube-apiserver: a Service's EndpointSlices are published within a watch
// event (the resync is an hour), follow a change of the slice, a second
// slice, and go when the slices are deleted.
func TestServiceEndpointsFromKubeAPI(t *testing.T) {
	kapi := kubeapi.Start(t, storetest.StartEtcd(t).Endpoints()[0])
	cl := storetest.StartEtcd(t).Client(t)
	do := func(method, path string, body any, want int) {
		t.Helper()
		if code, out := kapi.Do(t, method, path, body); code != want {
			t.Fatalf("%s %s: %d %s", method, path, code, out)
		}
	}
	const base = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
	sliceObj := func(name string, addrs ...string) map[string]any {
		var eps []any
		for _, a := range addrs {
			eps = append(eps, map[string]any{"addresses": []string{a}})
		}
		return map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
			"metadata":    map[string]any{"name": name, "labels": map[string]string{k8s.LabelServiceName: "web"}},
			"addressType": "IPv4", "endpoints": eps,
			"ports": []any{map[string]any{"name": "http", "protocol": "TCP", "port": 8080}}}
	}
	do(http.MethodPost, "/api/v1/namespaces/default/services", map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "web"},
		"spec":     map[string]any{"ports": []any{map[string]any{"name": "http", "port": 80, "targetPort": 8080}}}}, http.StatusCreated)

	c, err := New(cl, kapi.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	c.Resync = time.Hour
	c.Logf = t.Logf
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	addrsAre := func(want ...[]string) func() bool {
		return func() bool {
			se, _ := published(t, cl, "default", "web")
			if se == nil {
				return len(want) == 0
			}
			var got [][]string
			for _, s := range se.Slices {
				if !reflect.DeepEqual(s.Ports, []store.ServicePort{{Name: "http", Protocol: "TCP", Port: 8080}}) {
					return false
				}
				got = append(got, s.Addresses)
			}
			return fmt.Sprint(got) == fmt.Sprint(want)
		}
	}
	do(http.MethodPost, base, sliceObj("web-1", "10.1.0.1", "10.1.0.2"), http.StatusCreated)
	waitUntil(t, "the slice published", addrsAre([]string{"10.1.0.1", "10.1.0.2"}))

	do(http.MethodPut, base+"/web-1", sliceObj("web-1", "10.1.0.3"), http.StatusOK)
	waitUntil(t, "the changed slice published", addrsAre([]string{"10.1.0.3"}))

	do(http.MethodPost, base, sliceObj("web-2", "10.1.0.4"), http.StatusCreated)
	waitUntil(t, "the second slice published", addrsAre([]string{"10.1.0.3"}, []string{"10.1.0.4"}))

	do(http.MethodDelete, base+"/web-1", nil, http.StatusOK)
	do(http.MethodDelete, base+"/web-2", nil, http.StatusOK)
	waitUntil(t, "the endpoints withdrawn", addrsAre())
}

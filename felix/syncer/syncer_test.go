package syncer

import (
	"reflect"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// Service endpoints published by the controller reach the calculation as
// typed updates; an undecodable value is skipped.
func TestDecodeServiceEndpoints(t *testing.T) {
	key := etcdv3.ServiceEndpointsKey("shop", "web")
	u, ok := decodeService(etcdv3.RawEvent{Type: store.EventPut, Key: key,
		Value: []byte(`{"namespace":"shop","name":"web","slices":[{"name":"web-1","addresses":["10.0.0.1"],"ports":[{"protocol":"TCP","port":80}]}]}`)})
	want := &store.ServiceEndpoints{Namespace: "shop", Name: "web", Slices: []store.ServiceSlice{
		{Name: "web-1", Addresses: []string{"10.0.0.1"}, Ports: []store.ServicePort{{Protocol: "TCP", Port: 80}}}}}
	if !ok || u.Kind != calc.KindService || u.Key != key || u.Deleted || !reflect.DeepEqual(u.Service, want) {
		t.Errorf("put: %+v %v", u, ok)
	}
	if u, ok := decodeService(etcdv3.RawEvent{Type: store.EventDelete, Key: key}); !ok || u.Kind != calc.KindService || !u.Deleted || u.Service != nil {
		t.Errorf("delete: %+v %v", u, ok)
	}
	if _, ok := decodeService(etcdv3.RawEvent{Type: store.EventPut, Key: key, Value: []byte(`{`)}); ok {
		t.Error("an undecodable value was passed on")
	}
	if _, ok := decodeService(etcdv3.RawEvent{Type: store.EventPut, Key: etcdv3.ServicePrefix + "no-name", Value: []byte(`{}`)}); ok {
		t.Error("a key without namespace/name was passed on")
	}
}

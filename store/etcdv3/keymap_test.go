package etcdv3_test

import (
	"testing"

	"github.com/calico-aio/calico-aio/store/etcdv3"
	"github.com/calico-aio/calico-aio/store/model"
)

// Model keys map to Calico's etcd keys, byte for byte, and back.
func TestModelKeysAreCalicosEtcdKeys(t *testing.T) {
	for _, c := range []struct {
		key  model.Key
		etcd string
	}{
		{model.Key{Kind: "IPPool", Name: "default-ipv4-ippool"}, "/calico/resources/v3/projectcalico.org/ippools/default-ipv4-ippool"},
		{model.Key{Kind: "WorkloadEndpoint", Namespace: "default", Name: "node1-k8s-pod1-eth0"}, "/calico/resources/v3/projectcalico.org/workloadendpoints/default/node1-k8s-pod1-eth0"},
		{model.Key{Kind: "NetworkPolicy", Namespace: "ns1", Name: "default.allow"}, "/calico/resources/v3/projectcalico.org/networkpolicies/ns1/default.allow"},
		{model.Key{Kind: "StagedGlobalNetworkPolicy", Name: "p"}, "/calico/resources/v3/projectcalico.org/stagedglobalnetworkpolicies/p"},
		{model.Key{Kind: model.KindIPAMBlock, Name: "10.65.0.0/26"}, "/calico/ipam/v2/assignment/ipv4/block/10.65.0.0-26"},
		{model.Key{Kind: model.KindIPAMBlock, Name: "fd00:65::/122"}, "/calico/ipam/v2/assignment/ipv6/block/fd00:65::-122"},
		{model.Key{Kind: model.KindBlockAffinity, Node: "node1", Name: "10.65.0.64/26"}, "/calico/ipam/v2/host/node1/ipv4/block/10.65.0.64-26"},
		{model.Key{Kind: model.KindIPAMHandle, Name: "k8s-pod-network.c0ffee"}, "/calico/ipam/v2/handle/k8s-pod-network.c0ffee"},
		{model.Key{Kind: model.KindIPAMConfig, Name: "default"}, "/calico/ipam/v2/config"},
	} {
		got, err := etcdv3.EtcdKey(c.key)
		if err != nil || got != c.etcd {
			t.Errorf("EtcdKey(%s) = %q, %v; want %q", c.key, got, err, c.etcd)
		}
		back, ok := etcdv3.ModelKey(c.etcd)
		if !ok || back != c.key {
			t.Errorf("ModelKey(%q) = %s, %v; want %s", c.etcd, back, ok, c.key)
		}
	}
	for _, bad := range []model.Key{
		{Kind: "NoSuchKind", Name: "x"},
		{Kind: "IPPool"},
		{Kind: "IPPool", Name: "a/b"},
		{Kind: model.KindIPAMBlock, Name: "10.65.0.1/26"},
		{Kind: model.KindBlockAffinity, Name: "10.65.0.0/26"},
		{Kind: model.KindIPAMConfig, Name: "other"},
	} {
		if k, err := etcdv3.EtcdKey(bad); err == nil {
			t.Errorf("EtcdKey(%+v) = %q, want an error", bad, k)
		}
	}
	for _, foreign := range []string{"/calico/felix/v2/no-region/host/node1/status", "/calico/aio/v1/services/ns/svc", "/calico/resources/v3/projectcalico.org/bgpfilters/f"} {
		if k, ok := etcdv3.ModelKey(foreign); ok {
			t.Errorf("ModelKey(%q) = %s, want none (outside the model)", foreign, k)
		}
	}
}

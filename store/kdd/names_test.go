package kdd_test

import (
	"net/netip"
	"testing"

	"github.com/calico-aio/calico-aio/store/kdd"
)

func TestNames(t *testing.T) {
	v4 := netip.MustParsePrefix("10.244.166.128/26")
	v6 := netip.MustParsePrefix("fd00:10:244:0:1::40/122")
	for _, c := range []struct{ got, want string }{
		{kdd.BlockName(v4), "10-244-166-128-26"},
		{kdd.BlockName(v6), "fd00-10-244-0-1--40-122"},
		{kdd.AffinityName("node1", v4), "node1-10-244-166-128-26"},
		{kdd.AffinityName("node-a", v6), "node-a-fd00-10-244-0-1--40-122"},
		{kdd.HandleName("k8s-pod-network.C4719afa"), "k8s-pod-network.c4719afa"},
		{kdd.IPAMConfigName, "default"},
		// recorded: the BlockAffinity label of node1
		{kdd.HostnameHash("node1"), "7DS2CCNJGGLTHBDQLLFO6SX24SY2YDDEG3W2VN556FA2W4DLLV5A"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestReverseUID(t *testing.T) {
	// recorded: Tier security's CR uid and the uid calicoctl showed
	cr, v3 := "c63417d3-cebf-44c7-9154-d307a114bf96", "632ce8cb-73fd-44e3-912a-cbe08528fd69"
	if got, err := kdd.ReverseUID(cr); err != nil || got != v3 {
		t.Errorf("ReverseUID(%s) = %s, %v; want %s", cr, got, err, v3)
	}
	if got, err := kdd.ReverseUID(v3); err != nil || got != cr {
		t.Errorf("ReverseUID(%s) = %s, %v; want %s", v3, got, err, cr)
	}
	for _, bad := range []string{"x", "c63417d3cebf44c79154d307a114bf96", "c63417d3-cebf-44c7-9154-d307a114bf9g"} {
		if _, err := kdd.ReverseUID(bad); err == nil {
			t.Errorf("ReverseUID(%q) accepted", bad)
		}
	}
}

func TestKindsServed(t *testing.T) {
	for kind, want := range map[string]string{
		"IPPool": "ippools", "NetworkPolicy": "networkpolicies", "IPAMBlock": "ipamblocks",
		"BlockAffinity": "blockaffinities", "IPAMHandle": "ipamhandles", "IPAMConfig": "ipamconfigs",
		"WorkloadEndpoint": "pods", "Node": "nodes",
	} {
		if k, ok := kdd.LookupKind(kind); !ok || k.Resource != want {
			t.Errorf("LookupKind(%s) = %+v, %v; want resource %s", kind, k, ok, want)
		}
	}
}

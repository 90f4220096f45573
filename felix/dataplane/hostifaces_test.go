package dataplane

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
)

// The host's interfaces with their addresses, for host endpoints by
// expectedIPs; workload interfaces are left out.
func TestHostInterfaces(t *testing.T) {
	needKernel(t)
	n := newKernelNS(t, wrapTools(t))
	var got map[string][]netip.Addr
	if err := n.Do(func(ns.NetNS) error {
		var err error
		dp := New(Config{})
		defer dp.Close()
		got, err = dp.HostInterfaces(DefaultIfacePrefixes)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got["uplink"], netip.MustParseAddr("172.30.0.1")) || !slices.Contains(got["uplink"], netip.MustParseAddr("fd00:30::1")) {
		t.Errorf("uplink addresses %v", got["uplink"])
	}
	if !slices.Contains(got["lo"], netip.MustParseAddr("127.0.0.1")) {
		t.Errorf("lo addresses %v", got["lo"])
	}
	for name := range got {
		if len(name) >= 4 && name[:4] == "cali" {
			t.Errorf("workload interface %s listed", name)
		}
	}
}

package dataplane

import (
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/internal/nstest"
)

// TestKubeProxyNFTablesKernel: in a namespace of its own, kube-proxy's
// nftables mode is detected by its "ip kube-proxy" or "ip6 kube-proxy"
// table, and not by other tables (another family's or another name).
func TestKubeProxyNFTablesKernel(t *testing.T) {
	nstest.NeedKernel(t, "nft")
	n := nstest.NewNS(t)
	detect := func() bool {
		t.Helper()
		var got bool
		if err := n.Do(func(ns.NetNS) error {
			var err error
			got, err = KubeProxyNFTables()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, step := range []struct {
		cmd  []string
		want bool
	}{
		{nil, false},
		{[]string{"add", "table", "inet", "kube-proxy"}, false},
		{[]string{"add", "table", "ip", "filter"}, false},
		{[]string{"add", "table", "ip6", "kube-proxy"}, true},
		{[]string{"delete", "table", "ip6", "kube-proxy"}, false},
		{[]string{"add", "table", "ip", "kube-proxy"}, true},
		{[]string{"delete", "table", "ip", "kube-proxy"}, false},
	} {
		if step.cmd != nil {
			run(t, n, "nft", step.cmd...)
		}
		if got := detect(); got != step.want {
			t.Errorf("after nft %v: kube-proxy nftables mode detected %v, want %v", step.cmd, got, step.want)
		}
	}
}

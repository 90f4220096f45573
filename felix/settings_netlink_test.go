package felix

import (
	"context"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/internal/nstest"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// TestConfigNetlinkTimeoutAgentLive: netlinkTimeout written while the
// agent runs (default, then node.<name>, then 0) reaches the dataplane's
// netlink socket on the next apply, in the agent's namespace
// (felix/dataplane TestConfigNetlinkTimeoutLive shows the socket itself).
func TestConfigNetlinkTimeoutAgentLive(t *testing.T) {
	nstest.NeedKernel(t, "iptables-restore", "ip6tables-restore", "ipset")
	n := nstest.NewNS(t)
	e := storetest.StartEtcd(t)
	a := newAgent(config.Config{NodeName: "n1", LibDir: t.TempDir()}, e.Client(t), false)
	defer a.dp.Close()
	ctx := context.Background()
	step := func(name, value string, want time.Duration) {
		t.Helper()
		if name != "" {
			a.fold(felixUpdate(fc(t, name, "netlinkTimeout", value), false))
		}
		if err := n.Do(func(ns.NetNS) error { return a.apply(ctx) }); err != nil {
			t.Fatalf("apply: %v", err)
		}
		if got := a.dp.NetlinkTimeout(); got != want {
			t.Errorf("after %s netlinkTimeout %s: the dataplane's socket timeout %s, want %s", name, value, got, want)
		}
	}
	step("", "", 10*time.Second) // Calico's default
	step("default", `"3s"`, 3*time.Second)
	step("node.n1", `"1500ms"`, 1500*time.Millisecond)
	step("node.n1", `"0s"`, 0) // none
}

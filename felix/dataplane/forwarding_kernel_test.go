package dataplane

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/store/api"
)

const (
	ipForwardV4 = "net.ipv4.ip_forward"
	ipForwardV6 = "net.ipv6.conf.all.forwarding"
)

// freshHostForwarding sets forwarding off in n, as on a fresh Linux host
// (a new namespace inherits the IPv4 value of the host's).
func freshHostForwarding(t *testing.T, n ns.NetNS) {
	t.Helper()
	run(t, n, "sysctl", "-qw", ipForwardV4+"=0", ipForwardV6+"=0")
	if got := forwardingOf(t, n); got != "0 0" {
		t.Fatalf("forwarding is %q after setting it off", got)
	}
}

// forwardingOf is "<ip_forward> <ipv6 all forwarding>" in n.
func forwardingOf(t *testing.T, n ns.NetNS) string {
	t.Helper()
	return strings.Join(strings.Fields(run(t, n, "sysctl", "-n", ipForwardV4, ipForwardV6)), " ")
}

func felixConfig(name, ipForwarding string) *api.FelixConfiguration {
	fc := newObj("FelixConfiguration").(*api.FelixConfiguration)
	fc.Metadata.Name = name
	fc.Spec.IPForwarding = ipForwarding
	return fc
}

// The agent turns IPv4 and IPv6 forwarding on, as Calico's Felix does with
// FelixConfiguration ipForwarding Enabled (the default); Disabled leaves
// them as they are, a node's own configuration wins over "default", and
// IPv6 forwarding is only touched with the IPv6 dataplane on.
func TestDataplaneIPForwarding(t *testing.T) {
	needKernel(t)
	tools := wrapTools(t)
	base := func() datastore {
		ds := datastore{}
		ds.put(t, ippool("v4", "10.65.0.0/16", true))
		ds.put(t, wep("prod", "web", "calitest1", "ee:ee:ee:00:00:01", nil, "10.65.0.2/32"))
		return ds
	}
	with := func(cfgs ...*api.FelixConfiguration) datastore {
		ds := base()
		for _, c := range cfgs {
			ds.put(t, c)
		}
		return ds
	}
	for _, tc := range []struct {
		name string
		ds   datastore
		ipv6 bool
		want string
	}{
		{"no configuration: enabled", base(), true, "1 1"},
		{"Enabled", with(felixConfig("default", "Enabled")), true, "1 1"},
		{"Enabled without IPv6", with(felixConfig("default", "Enabled")), false, "1 0"},
		{"Disabled", with(felixConfig("default", "Disabled")), true, "0 0"},
		{"the node's Disabled wins", with(felixConfig("default", "Enabled"), felixConfig("node."+thisNode, "Disabled")), true, "0 0"},
		{"the node's Enabled wins", with(felixConfig("default", "Disabled"), felixConfig("node."+thisNode, "Enabled")), true, "1 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newKernelNS(t, tools)
			freshHostForwarding(t, n)
			nd := newNode(t, n)
			for _, u := range updates(t, nd.ds, tc.ds) {
				nd.state.Apply(u)
			}
			nd.des = toDataplane(nd.state.Desired(tc.ipv6), nil)
			nd.apply()
			if got := forwardingOf(t, n); got != tc.want {
				t.Errorf("forwarding (ipv4 ipv6) is %q, want %q", got, tc.want)
			}
		})
	}
}

// Forwarding turned off by someone else is turned on again at the next
// resync, and turning Disabled on later does not turn it off.
func TestDataplaneIPForwardingRepairsDrift(t *testing.T) {
	needKernel(t)
	tools := wrapTools(t)
	n := newKernelNS(t, tools)
	freshHostForwarding(t, n)
	nd := newNode(t, n)
	ds := datastore{}
	ds.put(t, ippool("v4", "10.65.0.0/16", true))
	nd.to(dpState{ds: ds})
	if got := forwardingOf(t, n); got != "1 1" {
		t.Fatalf("forwarding is %q after the first apply, want 1 1", got)
	}
	run(t, n, "sysctl", "-qw", ipForwardV4+"=0", ipForwardV6+"=0")
	nd.dp.Resync()
	nd.apply()
	if got := forwardingOf(t, n); got != "1 1" {
		t.Errorf("forwarding is %q after a resync, want it repaired to 1 1", got)
	}

	ds = datastore{}
	ds.put(t, ippool("v4", "10.65.0.0/16", true))
	ds.put(t, felixConfig("default", "Disabled"))
	nd.to(dpState{ds: ds})
	run(t, n, "sysctl", "-qw", ipForwardV4+"=0")
	nd.dp.Resync()
	nd.apply()
	if got := forwardingOf(t, n); got != "0 1" {
		t.Errorf("forwarding is %q with Disabled, want what was there (0 1)", got)
	}
}

// A value Calico does not define (stored by another writer, bypassing
// validation) is reported once, naming the field, and the default applies.
func TestDataplaneIPForwardingUnknownValue(t *testing.T) {
	needKernel(t)
	tools := wrapTools(t)
	n := newKernelNS(t, tools)
	freshHostForwarding(t, n)
	var logs bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	nd := newNode(t, n)
	bad := felixConfig("default", "On")
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "spec.ipForwarding") {
		t.Fatalf("validation of ipForwarding On: %v, want an error naming spec.ipForwarding", err)
	}
	nd.state.Apply(calc.Update{Kind: "felixconfigurations", Key: "/calico/resources/v3/projectcalico.org/felixconfigurations/default", Resource: bad})
	for i := 0; i < 2; i++ {
		nd.des = toDataplane(nd.state.Desired(true), nil)
		nd.dp.Resync()
		nd.apply()
	}
	if got := forwardingOf(t, n); got != "1 1" {
		t.Errorf("forwarding is %q, want the default (1 1)", got)
	}
	if c := strings.Count(logs.String(), `spec.ipForwarding: \"On\"`); c != 1 {
		t.Errorf("the bad value was reported %d times, want once; log:\n%s", c, logs.String())
	}
}

package node

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

func poolsFrom(t *testing.T, env map[string]string) ([]*api.IPPool, error) {
	t.Helper()
	return ParseDefaultPools(func(k string) string { return env[k] })
}

func poolLine(p *api.IPPool) string {
	s := p.Spec
	return fmt.Sprintf("%s %s block=%d ipip=%s vxlan=%s nat=%t sel=%s uses=%v", p.Metadata.Name, s.CIDR, s.BlockSize,
		s.IPIPMode, s.VXLANMode, s.NATOutgoing, s.NodeSelector, s.AllowedUses)
}

func TestParseDefaultPools(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{nil, []string{"default-ipv4-ippool 192.168.0.0/16 block=26 ipip=Never vxlan=Never nat=true sel=all() uses=[Workload Tunnel]"}},
		{map[string]string{"CALICO_IPV4POOL_CIDR": "10.7.1.2/16", "CALICO_IPV4POOL_BLOCK_SIZE": "28", "CALICO_IPV4POOL_NAT_OUTGOING": "false",
			"CALICO_IPV4POOL_NODE_SELECTOR": "zone == 'a'", "CALICO_IPV4POOL_IPIP": "off", "CALICO_IPV4POOL_VXLAN": "NEVER"},
			[]string{"default-ipv4-ippool 10.7.0.0/16 block=28 ipip=Never vxlan=Never nat=false sel=zone == 'a' uses=[Workload Tunnel]"}},
		// IPv6 only when a CIDR is given; NAT outgoing off by default.
		{map[string]string{"CALICO_IPV6POOL_CIDR": "fd00:7::/48", "CALICO_IPV6POOL_BLOCK_SIZE": "120"}, []string{
			"default-ipv4-ippool 192.168.0.0/16 block=26 ipip=Never vxlan=Never nat=true sel=all() uses=[Workload Tunnel]",
			"default-ipv6-ippool fd00:7::/48 block=120 ipip=Never vxlan=Never nat=false sel=all() uses=[Workload Tunnel]"}},
		{map[string]string{"CALICO_IPV4POOL_CIDR": "none", "CALICO_IPV6POOL_CIDR": "fd00:8::/64", "CALICO_IPV6POOL_NAT_OUTGOING": "true"},
			[]string{"default-ipv6-ippool fd00:8::/64 block=122 ipip=Never vxlan=Never nat=true sel=all() uses=[Workload Tunnel]"}},
		{map[string]string{"NO_DEFAULT_POOLS": "true", "CALICO_IPV4POOL_BLOCK_SIZE": "24"}, nil},
		// VXLAN is honoured (docs/OVERLAY.md).
		{map[string]string{"CALICO_IPV4POOL_VXLAN": "CrossSubnet", "CALICO_IPV6POOL_CIDR": "fd00:9::/48", "CALICO_IPV6POOL_VXLAN": "Always"}, []string{
			"default-ipv4-ippool 192.168.0.0/16 block=26 ipip=Never vxlan=CrossSubnet nat=true sel=all() uses=[Workload Tunnel]",
			"default-ipv6-ippool fd00:9::/48 block=122 ipip=Never vxlan=Always nat=false sel=all() uses=[Workload Tunnel]"}},
		// IP-in-IP is honoured too (docs/OVERLAY.md); IPv6 pools have none.
		{map[string]string{"CALICO_IPV4POOL_IPIP": "CrossSubnet"}, []string{
			"default-ipv4-ippool 192.168.0.0/16 block=26 ipip=CrossSubnet vxlan=Never nat=true sel=all() uses=[Workload Tunnel]"}},
		{map[string]string{"CALICO_IPV4POOL_IPIP": "Always", "CALICO_IPV6POOL_CIDR": "fd00:9::/48"}, []string{
			"default-ipv4-ippool 192.168.0.0/16 block=26 ipip=Always vxlan=Never nat=true sel=all() uses=[Workload Tunnel]",
			"default-ipv6-ippool fd00:9::/48 block=122 ipip=Never vxlan=Never nat=false sel=all() uses=[Workload Tunnel]"}},
		{map[string]string{"NO_DEFAULT_POOLS": "false"}, []string{"default-ipv4-ippool 192.168.0.0/16 block=26 ipip=Never vxlan=Never nat=true sel=all() uses=[Workload Tunnel]"}},
	} {
		pools, err := poolsFrom(t, tc.env)
		if err != nil {
			t.Errorf("%v: %v", tc.env, err)
			continue
		}
		var got []string
		for _, p := range pools {
			got = append(got, poolLine(p))
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%v:\n got %q\nwant %q", tc.env, got, tc.want)
		}
	}
}

// Every bad value fails start-up with an error naming its variable.
func TestParseDefaultPoolsErrors(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"CALICO_IPV4POOL_CIDR": "10.0.0.0/33"}, `CALICO_IPV4POOL_CIDR="10.0.0.0/33": is not an IPv4 CIDR`},
		{map[string]string{"CALICO_IPV4POOL_CIDR": "fd00::/48"}, `CALICO_IPV4POOL_CIDR="fd00::/48": is not an IPv4 CIDR`},
		{map[string]string{"CALICO_IPV6POOL_CIDR": "10.0.0.0/16"}, `CALICO_IPV6POOL_CIDR="10.0.0.0/16": is not an IPv6 CIDR`},
		{map[string]string{"CALICO_IPV4POOL_CIDR": "169.254.0.0/16"}, `CALICO_IPV4POOL_CIDR="169.254.0.0/16": spec.cidr overlaps the IPv4 link-local range`},
		{map[string]string{"CALICO_IPV4POOL_BLOCK_SIZE": "x"}, `CALICO_IPV4POOL_BLOCK_SIZE="x": is not a number`},
		{map[string]string{"CALICO_IPV4POOL_BLOCK_SIZE": "19"}, `CALICO_IPV4POOL_BLOCK_SIZE="19": must be between 20 and 32`},
		{map[string]string{"CALICO_IPV6POOL_CIDR": "fd00::/48", "CALICO_IPV6POOL_BLOCK_SIZE": "64"}, `CALICO_IPV6POOL_BLOCK_SIZE="64": must be between 116 and 128`},
		{map[string]string{"CALICO_IPV4POOL_CIDR": "10.0.0.0/28", "CALICO_IPV4POOL_BLOCK_SIZE": "26"}, `CALICO_IPV4POOL_BLOCK_SIZE="26": is shorter than CALICO_IPV4POOL_CIDR's prefix length 28`},
		{map[string]string{"CALICO_IPV4POOL_IPIP": "sometimes"}, `CALICO_IPV4POOL_IPIP="sometimes": must be Always, CrossSubnet or Never`},
		{map[string]string{"CALICO_IPV6POOL_CIDR": "fd00::/48", "CALICO_IPV6POOL_VXLAN": "on"}, `CALICO_IPV6POOL_VXLAN="on": must be Always, CrossSubnet or Never`},
		{map[string]string{"CALICO_IPV4POOL_NAT_OUTGOING": "maybe"}, `CALICO_IPV4POOL_NAT_OUTGOING="maybe": must be true or false`},
		{map[string]string{"CALICO_IPV4POOL_NODE_SELECTOR": "a ==="}, `CALICO_IPV4POOL_NODE_SELECTOR="a ===": spec.nodeSelector`},
		{map[string]string{"NO_DEFAULT_POOLS": "yes please"}, `NO_DEFAULT_POOLS="yes please": must be true or false`},
		{map[string]string{"NO_DEFAULT_POOLS": "true", "CALICO_IPV4POOL_CIDR": "10.0.0.0/16"}, `NO_DEFAULT_POOLS=true and CALICO_IPV4POOL_CIDR="10.0.0.0/16"`},
		// A pool may not encapsulate both ways (the IPPool validation).
		{map[string]string{"CALICO_IPV4POOL_IPIP": "Always", "CALICO_IPV4POOL_VXLAN": "Always"}, `spec.vxlanMode`},
		// Refused at write (store/api/unsupported.go): start-up fails
		// naming the variable rather than storing a field nothing acts on.
		{map[string]string{"CALICO_IPV4POOL_DISABLE_BGP_EXPORT": "true"}, `CALICO_IPV4POOL_DISABLE_BGP_EXPORT="true": spec.disableBGPExport is not supported`},
	} {
		_, err := poolsFrom(t, tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to contain %q", tc.env, err, tc.want)
		}
	}
}

// Default pools are created only for a family with no pool, and an existing
// pool is never changed.
func TestEnsureDefaultPools(t *testing.T) {
	ctx := context.Background()
	cl := storetest.StartEtcd(t).Client(t)
	k, _ := api.LookupKind("IPPool")
	list := func() string {
		t.Helper()
		objs, _, err := cl.ListResources(ctx, k, "")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range objs {
			out = append(out, poolLine(o.(*api.IPPool)))
		}
		return strings.Join(out, "\n")
	}
	want, err := poolsFrom(t, map[string]string{"CALICO_IPV4POOL_CIDR": "10.60.0.0/16", "CALICO_IPV6POOL_CIDR": "fd00:60::/48"})
	if err != nil {
		t.Fatal(err)
	}
	// An IPv6 pool exists: only the IPv4 default is created.
	mine := k.NewObject().(*api.IPPool)
	mine.Metadata.Name = "mine6"
	mine.Spec.CIDR, mine.Spec.BlockSize, mine.Spec.NATOutgoing = "fd00:61::/64", 124, true
	if _, err := cl.CreateResource(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if err := EnsureDefaultPools(ctx, cl, want); err != nil {
		t.Fatal(err)
	}
	first := list()
	wantList := "default-ipv4-ippool 10.60.0.0/16 block=26 ipip=Never vxlan=Never nat=true sel=all() uses=[Workload Tunnel]\n" +
		"mine6 fd00:61::/64 block=124 ipip=Never vxlan=Never nat=true sel=all() uses=[Workload Tunnel]"
	if first != wantList {
		t.Errorf("after first start:\n%s\nwant\n%s", first, wantList)
	}
	// A restart with other variables changes nothing that exists.
	again, err := poolsFrom(t, map[string]string{"CALICO_IPV4POOL_CIDR": "10.70.0.0/16", "CALICO_IPV4POOL_NAT_OUTGOING": "false"})
	if err != nil {
		t.Fatal(err)
	}
	if err := EnsureDefaultPools(ctx, cl, again); err != nil {
		t.Fatal(err)
	}
	if got := list(); got != first {
		t.Errorf("a restart changed the pools:\n%s\nwas\n%s", got, first)
	}
	// Pools the user replaced are not recreated either: a family is
	// present whatever its pools are called.
	p, err := cl.GetResource(ctx, k, "", "default-ipv4-ippool")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.DeleteObject(ctx, p); err != nil {
		t.Fatal(err)
	}
	other := k.NewObject().(*api.IPPool)
	other.Metadata.Name = "other4"
	other.Spec.CIDR = "10.80.0.0/16"
	if _, err := cl.CreateResource(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := EnsureDefaultPools(ctx, cl, want); err != nil {
		t.Fatal(err)
	}
	if got := list(); strings.Contains(got, "default-ipv4-ippool") {
		t.Errorf("default recreated beside other4:\n%s", got)
	}
}

package node

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

func poolsFrom(t *testing.T, env map[string]string) ([]*api.IPPool, error) {
	t.Helper()
	return config.ParseDefaultPools(func(k string) string { return env[k] })
}

func poolLine(p *api.IPPool) string {
	s := p.Spec
	return fmt.Sprintf("%s %s block=%d ipip=%s vxlan=%s nat=%t sel=%s uses=%v", p.Metadata.Name, s.CIDR, s.BlockSize,
		s.IPIPMode, s.VXLANMode, s.NATOutgoing, s.NodeSelector, s.AllowedUses)
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

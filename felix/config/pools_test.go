package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
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

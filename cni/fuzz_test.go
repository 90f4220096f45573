package cni

import (
	"testing"
)

// FuzzNetConfAndArgs: parsing never panics, and accepted input is usable.
func FuzzNetConfAndArgs(f *testing.F) {
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"n","type":"calico","ipam":{"type":"calico-ipam"}}`), "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p")
	f.Add([]byte(`{"name":"n","mtu":"x","ipam":{"type":"calico-ipam","assign_ipv4":"false","assign_ipv6":true}}`), "IP=10.0.0.1,fd00::1")
	f.Add([]byte(`{"name":"n","etcd_endpoints":"http://a:1, https://b","ipam":{"type":"host-local","subnet":"usePodCidr"}}`), "IP=;x")
	f.Add([]byte(`{"name":1}`), "K8S_POD_NAME")
	f.Add([]byte(`[]`), "=;=")
	f.Fuzz(func(t *testing.T, conf []byte, args string) {
		c, err := LoadNetConf(conf)
		if err == nil {
			if c.Name == "" || c.IPAM.Type == "" {
				t.Fatalf("accepted a netconf without name or ipam type: %s", conf)
			}
			_ = c.EffectiveMTU()
			_ = c.endpoints()
		}
		a, err := ParseArgs(args)
		if err == nil {
			for _, ip := range a.IPs {
				if !ip.IsValid() {
					t.Fatalf("accepted an invalid IP from %q", args)
				}
			}
		}
	})
}

package config

import "testing"

// CALICO_NETWORKING_BACKEND: bird (the default) runs BGP; vxlan and none
// do not, as in calico-node.
func TestNetworkingBackendBGP(t *testing.T) {
	for backend, want := range map[string]bool{"": true, "bird": true, "vxlan": false, "none": false} {
		cfg, err := ParseFlags(nil, func(k string) string {
			if k == "CALICO_NETWORKING_BACKEND" {
				return backend
			}
			if k == "NODENAME" {
				return "n1"
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.BGP != want {
			t.Errorf("CALICO_NETWORKING_BACKEND=%q: BGP %v, want %v", backend, cfg.BGP, want)
		}
	}
}

package config

import (
	"strings"
	"testing"
)

// A bad pool variable (pools.go) fails ParseFlags too:
// calico-node exits 2 before starting.
func TestParseFlagsRefusesBadPools(t *testing.T) {
	if _, err := ParseFlags([]string{"--nodename", "n1"}, func(k string) string {
		return map[string]string{"CALICO_IPV4POOL_BLOCK_SIZE": "40"}[k]
	}); err == nil || !strings.Contains(err.Error(), "CALICO_IPV4POOL_BLOCK_SIZE") {
		t.Errorf("ParseFlags with a bad block size: %v", err)
	}
}

// A router ID RouterID refuses (felix/peering/routerid.go) fails at start.
func TestParseFlagsRefusesBadRouterID(t *testing.T) {
	for _, bad := range []string{"fd00::1", "nope", "10.0.0.256"} {
		if _, err := Parse([]string{"--router-id", bad}, func(string) string { return "" }, nil); err == nil {
			t.Errorf("--router-id %q accepted at start", bad)
		}
	}
}

package config

import (
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/node"
)

func TestParseMTUEnv(t *testing.T) {
	env := map[string]string{"FELIX_MTUIFACEPATTERN": "^bond", "FELIX_VXLANMTU": "1350", "FELIX_IPINIPMTU": "1420", "FELIX_VXLANMTUV6": "1330"}
	c, err := ParseFlags([]string{"--nodename", "n"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if s := node.MTUFromSpec(0, c.FelixEnv); s != (node.MTUSettings{Pattern: "^bond", VXLANMTU: 1350, IPIPMTU: 1420, VXLANMTUV6: 1330}) {
		t.Errorf("parsed %+v", s)
	}
	for k, v := range map[string]string{"FELIX_MTUIFACEPATTERN": "(", "FELIX_VXLANMTU": "big", "FELIX_IPINIPMTU": "40", "FELIX_VXLANMTUV6": "70000"} {
		_, err := ParseFlags([]string{"--nodename", "n"}, func(n string) string { return map[string]string{k: v}[n] })
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: error %v, want it named", k, v, err)
		}
	}
	if _, err := ParseFlags([]string{"--nodename", "n", "--mtu", "20"}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "FELIX_MTU") {
		t.Errorf("--mtu 20: %v", err)
	}
	c, err = ParseFlags([]string{"--nodename", "n"}, func(k string) string { return map[string]string{"FELIX_MTU": "1400"}[k] })
	if err != nil || c.mtu.Override != 1400 {
		t.Errorf("FELIX_MTU=1400: %+v %v", c.mtu, err)
	}
}

// A bad pool variable (felix/node/pools.go) fails ParseFlags too:
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

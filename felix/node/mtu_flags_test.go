package node

import (
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/config"
)

// TestParseMTUEnv: the MTU variables config.ParseFlags reads are the MTU
// settings the pod MTU is computed from.
func TestParseMTUEnv(t *testing.T) {
	env := map[string]string{"FELIX_MTUIFACEPATTERN": "^bond", "FELIX_VXLANMTU": "1350", "FELIX_IPINIPMTU": "1420", "FELIX_VXLANMTUV6": "1330"}
	c, err := config.ParseFlags([]string{"--nodename", "n"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if s := MTUFromSpec(0, c.FelixEnv); s != (MTUSettings{Pattern: "^bond", VXLANMTU: 1350, IPIPMTU: 1420, VXLANMTUV6: 1330}) {
		t.Errorf("parsed %+v", s)
	}
	for k, v := range map[string]string{"FELIX_MTUIFACEPATTERN": "(", "FELIX_VXLANMTU": "big", "FELIX_IPINIPMTU": "40", "FELIX_VXLANMTUV6": "70000"} {
		_, err := config.ParseFlags([]string{"--nodename", "n"}, func(n string) string { return map[string]string{k: v}[n] })
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: error %v, want it named", k, v, err)
		}
	}
	if _, err := config.ParseFlags([]string{"--nodename", "n", "--mtu", "20"}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "FELIX_MTU") {
		t.Errorf("--mtu 20: %v", err)
	}
	c, err = config.ParseFlags([]string{"--nodename", "n"}, func(k string) string { return map[string]string{"FELIX_MTU": "1400"}[k] })
	if err != nil || c.MTU != 1400 {
		t.Errorf("FELIX_MTU=1400: %d %v", c.MTU, err)
	}
}

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// ourSetHeaders maps each of our IPv4 IP sets in the host namespace to its
// `ipset list` header and members.
func ourSetHeaders(t *testing.T, e *cniEnv) map[string]string {
	t.Helper()
	out := mustNS(t, e.host.ns, "ipset", "list")
	sets := map[string]string{}
	name := ""
	for _, l := range strings.Split(out, "\n") {
		if n, ok := strings.CutPrefix(l, "Name: "); ok {
			name = n
			continue
		}
		if strings.HasPrefix(name, "cali40") {
			sets[name] += l + "\n"
		}
	}
	return sets
}

// TestConfigMaxIpsetSizeLive: the IP set a policy's source selector needs
// is created with maxelem 1048576 (Calico's maxIpsetSize default);
// maxIpsetSize written while the agent runs re-creates it with the new
// maxelem, members kept, and policy still lets the selected pod through.
func TestConfigMaxIpsetSizeLive(t *testing.T) {
	e, l := policyEnv(t, 241, "10.241.0.0/24", "")
	a, b := e.newPod(l, "ma"), e.newPod(l, "mb")
	e.apply(gnp("from-all", 10, "all()", []api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{Selector: "all()"}}},
		[]api.Rule{{Action: api.ActionAllow}}))
	eventually(t, 15*time.Second, "pods reach each other", reachable(a.ns, b.ip))
	check := func(maxelem string) func() error {
		return func() error {
			sets := ourSetHeaders(t, e)
			if len(sets) == 0 {
				return fmt.Errorf("no cali40 set")
			}
			for name, body := range sets {
				if !strings.Contains(body, "maxelem "+maxelem+" ") || !strings.Contains(body, a.ip) || !strings.Contains(body, b.ip) {
					return fmt.Errorf("set %s, want maxelem %s and both pods:\n%s", name, maxelem, body)
				}
			}
			return nil
		}
	}
	eventually(t, 15*time.Second, "sets with the default maxelem", check("1048576"))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { n := 1000; s.MaxIpsetSize = &n })
	eventually(t, 15*time.Second, "sets re-created with maxelem 1000", check("1000"))
	eventually(t, 15*time.Second, "policy still allows the selected pod", reachable(a.ns, b.ip))
}

package e2e

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// TestConfigRulesLive: the policy-rendering fields of FelixConfiguration,
// written while the agent runs, change what it programs: a denied TCP
// connect times out under iptablesFilterDenyAction Drop and is refused
// under Reject; disableConntrackInvalidCheck removes and restores the
// INVALID rules; logPrefix changes the LOG rule;
// iptablesNATOutgoingInterfaceFilter and natOutgoingExclusions
// IPPoolsAndHostIPs change the NAT outgoing rule (and fill the hosts set
// with this node's address); serviceLoopPrevention is accepted and
// changes nothing. The kernel-level tests in felix/rules show each
// verdict in traffic; this one shows the settings reach the dataplane.
func TestConfigRulesLive(t *testing.T) {
	t.Parallel()
	e, l := policyEnv(t, 187, "10.187.0.0/24", "")
	a, b := e.newPod(l, "ra"), e.newPod(l, "rb")
	listenPeer(t, b.ns, hostPort(b.ip, 8080))
	tcp := api.ProtocolFromString("TCP")
	e.apply(gnp("deny-8080", 10, "all()",
		[]api.Rule{{Action: api.ActionLog}, {Action: api.ActionDeny, Protocol: &tcp, Destination: api.EntityRule{Ports: []api.Port{api.SinglePort(8080)}}}, {Action: api.ActionAllow}},
		[]api.Rule{{Action: api.ActionAllow}}))
	eventually(t, policyTimeout, "pods reach each other", reachable(a.ns, b.ip))
	connect := func(want func(error) bool, what string) func() error {
		return func() error {
			if _, err := dialPeer(a.ns, hostPort(b.ip, 8080)); !want(err) {
				return fmt.Errorf("connect to the denied port: %v, want %s", err, what)
			}
			return nil
		}
	}
	timedOut := func(err error) bool { var ne net.Error; return errors.As(err, &ne) && ne.Timeout() }
	refused := func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
	save := func(table string) string { return mustNS(t, e.host.ns, "iptables-save", "-t", table) }
	has := func(table, text string, want bool) func() error {
		return func() error {
			if got := strings.Contains(save(table), text); got != want {
				return fmt.Errorf("%s table has %q: %v, want %v", table, text, got, want)
			}
			return nil
		}
	}

	eventually(t, policyTimeout, "Drop (default): a denied connect times out", connect(timedOut, "a timeout"))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.IptablesFilterDenyAction = "Reject" })
	eventually(t, policyTimeout, "Reject: a denied connect is refused", connect(refused, "connection refused"))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.IptablesFilterDenyAction = "Drop" })
	eventually(t, policyTimeout, "Drop again: a denied connect times out", connect(timedOut, "a timeout"))

	eventually(t, policyTimeout, "INVALID rules by default", has("filter", "--ctstate INVALID", true))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { v := true; s.DisableConntrackInvalidCheck = &v })
	eventually(t, policyTimeout, "disableConntrackInvalidCheck: no INVALID rule", has("filter", "--ctstate INVALID", false))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.DisableConntrackInvalidCheck = nil })
	eventually(t, policyTimeout, "INVALID rules back", has("filter", "--ctstate INVALID", true))

	eventually(t, policyTimeout, "default log prefix", has("filter", `--log-prefix "calico-packet: "`, true))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.LogPrefix = "e2e node1" })
	eventually(t, policyTimeout, "logPrefix", has("filter", `--log-prefix "e2e node1: "`, true))
	eventually(t, policyTimeout, "old log prefix gone", has("filter", "calico-packet", false))

	e.setNATOutgoing("v4", true)
	eventually(t, policyTimeout, "NAT outgoing rule", has("nat", "-j MASQUERADE", true))
	e.felixDefault(func(s *api.FelixConfigurationSpec) {
		s.IptablesNATOutgoingInterfaceFilter, s.NATOutgoingExclusions = "upl+", "IPPoolsAndHostIPs"
	})
	eventually(t, policyTimeout, "interface filter and hosts exclusion", func() error {
		for _, line := range strings.Split(save("nat"), "\n") {
			if strings.Contains(line, "-j MASQUERADE") && strings.Contains(line, "-o upl+") &&
				strings.Contains(line, "! --match-set cali40all-hosts-net dst") {
				return nil
			}
		}
		return fmt.Errorf("no MASQUERADE rule with -o upl+ and the hosts set:\n%s", save("nat"))
	})
	eventually(t, policyTimeout, "hosts set holds this node", func() error {
		out, err := inNS(e.host.ns, "ipset", "list", "cali40all-hosts-net")
		if err != nil || !strings.Contains(out, e.host.hostIP) {
			return fmt.Errorf("cali40all-hosts-net (want %s): %v %s", e.host.hostIP, err, out)
		}
		return nil
	})

	before := save("filter") + save("nat")
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.ServiceLoopPrevention = "Reject" })
	e.apply(gnp("nudge", 20, "has(e2e-nothing)", nil, nil)) // an apply that changes nothing either
	time.Sleep(2 * time.Second)
	if after := save("filter") + save("nat"); stripCounters(after) != stripCounters(before) {
		t.Errorf("serviceLoopPrevention Reject changed the rules:\n%s\n---\n%s", before, after)
	}
}

// stripCounters drops iptables-save's comment and counter lines, which
// change without any rule changing.
func stripCounters(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "#") || strings.HasPrefix(l, ":") {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

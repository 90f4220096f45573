package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// TestConfigKubeNodePortRangesLive: without kube-proxy's kube-ipvs0
// interface the agent renders nothing of kube-proxy IPVS mode. Once a
// kube-ipvs0 appears (a bridge here: this kernel has neither IPVS nor
// dummy links) the running agent renders it (Calico's Felix restarts to
// do so): cali-forward-check with the default node ports 30000:32767 and
// the this-host set holding the host's address. kubeNodePortRanges written
// while the agent runs changes the node port rules in the kernel (split
// at 15 ports per multiport rule); removing it brings the default back;
// deleting kube-ipvs0 removes every IPVS rule and the set. Real IPVS
// forwarding cannot be exercised on this kernel (felix/rules
// TestIPVSKernelPolicy shows the rules acting on packets).
func TestConfigKubeNodePortRangesLive(t *testing.T) {
	t.Parallel()
	e := newCNIEnv(t, 229)
	e.startAgent("node1") // --resync-interval 3s: interfaces are re-read every 3 s
	filter := func() string { return mustNS(t, e.host.ns, "iptables-save", "-t", "filter") }
	nodePorts := func() []string {
		var out []string
		for _, l := range strings.Split(filter(), "\n") {
			if strings.HasPrefix(l, "-A cali-forward-check ") && strings.Contains(l, "--dports ") {
				f := strings.Fields(l[strings.Index(l, "--dports "):])
				out = append(out, strings.Fields(l)[3]+" "+f[1])
			}
		}
		return out
	}
	want := func(what string, ports ...string) {
		t.Helper()
		eventually(t, 20*time.Second, what, func() error {
			if got := nodePorts(); strings.Join(got, "|") != strings.Join(ports, "|") {
				return fmt.Errorf("node port rules %q, want %q", got, ports)
			}
			return nil
		})
	}
	noIPVS := func(what string) {
		t.Helper()
		eventually(t, 20*time.Second, what, func() error {
			f := filter()
			for _, w := range []string{"cali-forward-check", "cali-set-endpoint-mark", "cali-forward-endpoint-mark", "cali-from-endpoint-mark", "this-host"} {
				if strings.Contains(f, w) {
					return fmt.Errorf("%s rendered:\n%s", w, f)
				}
			}
			if s := mustNS(t, e.host.ns, "ipset", "list", "-n"); strings.Contains(s, "this-host") {
				return fmt.Errorf("this-host set present:\n%s", s)
			}
			return nil
		})
	}
	if !strings.Contains(filter(), "-A cali-INPUT") {
		t.Fatalf("the agent programmed no cali-INPUT:\n%s", filter())
	}
	noIPVS("no kube-ipvs0: no IPVS rules")

	mustNS(t, e.host.ns, "ip", "link", "add", "kube-ipvs0", "type", "bridge")
	want("kube-ipvs0 appears: the default node ports", "tcp 30000:32767", "udp 30000:32767")
	eventually(t, 20*time.Second, "this-host holds the host's address", func() error {
		if s := mustNS(t, e.host.ns, "ipset", "list", "cali40this-host"); !strings.Contains(s, "\n"+e.host.hostIP+"\n") {
			return fmt.Errorf("cali40this-host:\n%s", s)
		}
		return nil
	})
	if f := filter(); !strings.Contains(f, "-A cali-INPUT -m comment") || !strings.Contains(f, "-j cali-forward-check") ||
		!strings.Contains(f, "-g cali-forward-endpoint-mark") {
		t.Fatalf("IPVS hooks missing from cali-INPUT/cali-OUTPUT:\n%s", f)
	}

	e.felixDefault(func(s *api.FelixConfigurationSpec) {
		s.KubeNodePortRanges = &[]api.Port{api.PortRange(30000, 30100), api.SinglePort(31000)}
	})
	want("kubeNodePortRanges 30000:30100,31000", "tcp 30000:30100,31000", "udp 30000:30100,31000")
	var many []api.Port
	for i := 0; i < 8; i++ {
		many = append(many, api.PortRange(uint16(30000+100*i), uint16(30010+100*i)))
	}
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.KubeNodePortRanges = &many })
	first := "30000:30010,30100:30110,30200:30210,30300:30310,30400:30410,30500:30510,30600:30610"
	want("8 ranges: 7 (14 ports) in one rule, 1 in the next", "tcp "+first, "udp "+first, "tcp 30700:30710", "udp 30700:30710")
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.KubeNodePortRanges = nil })
	want("kubeNodePortRanges removed: the default again", "tcp 30000:32767", "udp 30000:32767")

	mustNS(t, e.host.ns, "ip", "link", "del", "kube-ipvs0")
	noIPVS("kube-ipvs0 deleted: no IPVS rules")
}

// TestHostInterfaceEventsLive: with every periodic re-read off (so
// nothing but a datastore change or an interface event makes the agent
// apply), kube-ipvs0 appearing turns kube-proxy IPVS mode on, a new host
// address joins the this-host set, and kube-ipvs0 going turns the mode off,
// each as it happens: the agent watches the host's links and addresses
// (felix/hostiface/watch.go) as Calico's interface monitor does.
func TestHostInterfaceEventsLive(t *testing.T) {
	t.Parallel()
	e := newCNIEnv(t, 228)
	startAgentEnv(t, e.host.ns, "node1", e.etcd.Endpoints()[0], e.state, []string{"NO_DEFAULT_POOLS=true",
		"FELIX_IPTABLESREFRESHINTERVAL=0", "FELIX_ROUTEREFRESHINTERVAL=0", "FELIX_IPSETSREFRESHINTERVAL=0", "FELIX_INTERFACEREFRESHINTERVAL=0"}, "--bgp=false")
	filter := func() string { return mustNS(t, e.host.ns, "iptables-save", "-t", "filter") }
	ipvsRules := func(want bool) func() error {
		return func() error {
			if got := strings.Contains(filter(), "-A cali-forward-check "); got != want {
				return fmt.Errorf("cali-forward-check rendered: %v, want %v", got, want)
			}
			return nil
		}
	}
	if !strings.Contains(filter(), "-A cali-INPUT") {
		t.Fatalf("the agent programmed no cali-INPUT:\n%s", filter())
	}
	eventually(t, 5*time.Second, "no kube-ipvs0: no IPVS rules", ipvsRules(false))

	mustNS(t, e.host.ns, "ip", "link", "add", "kube-ipvs0", "type", "bridge")
	eventually(t, 10*time.Second, "kube-ipvs0 appears: IPVS rules", ipvsRules(true))

	mustNS(t, e.host.ns, "ip", "addr", "add", "192.0.2.77/32", "dev", "lo")
	eventually(t, 10*time.Second, "a new host address joins cali40this-host", func() error {
		if s := mustNS(t, e.host.ns, "ipset", "list", "cali40this-host"); !strings.Contains(s, "\n192.0.2.77\n") {
			return fmt.Errorf("cali40this-host:\n%s", s)
		}
		return nil
	})

	mustNS(t, e.host.ns, "ip", "link", "del", "kube-ipvs0")
	eventually(t, 10*time.Second, "kube-ipvs0 goes: no IPVS rules", ipvsRules(false))
}

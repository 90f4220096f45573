package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// felixDefault writes FelixConfiguration default with set applied to it.
func (e *cniEnv) felixDefault(set func(s *api.FelixConfigurationSpec)) {
	e.t.Helper()
	k, _ := api.LookupKind("FelixConfiguration")
	f := k.NewObject().(*api.FelixConfiguration)
	if r, err := e.cl.GetResource(ctxBG, k, "", "default"); err == nil {
		f = r.(*api.FelixConfiguration)
	}
	f.Metadata.Name = "default"
	set(&f.Spec)
	e.apply(f)
}

func secs(n int) *api.Duration { return &api.Duration{Duration: time.Duration(n) * time.Second} }

// TestConfigRefreshIntervalsLive: with every refresh interval at an hour,
// drift made by someone else in the agent's namespace (a deleted hook
// rule and the whole chain it jumped to, a deleted pod route, a member
// deleted from an IP set, forwarding turned off) stays; lowering one
// interval in FelixConfiguration to 1 s while the agent runs repairs its
// part of the kernel within a few intervals, and only that part (issue
// #25: the incremental apply must not hide drift from the resync).
func TestConfigRefreshIntervalsLive(t *testing.T) {
	e := newCNIEnv(t, 157)
	e.pool("p", "10.157.0.0/24")
	e.felixDefault(func(s *api.FelixConfigurationSpec) {
		s.IptablesRefreshInterval, s.RouteRefreshInterval = secs(3600), secs(3600)
		s.IpsetsRefreshInterval, s.InterfaceRefreshInterval = secs(3600), secs(3600)
	})
	l := e.conflist("1.0.0", "refnet", e.calicoPlugin("node1", ""))
	e.startAgent("node1", "--resync-interval", "0") // the harness's 3 s would set every interval
	a, b := e.newPod(l, "ra"), e.newPod(l, "rb")
	e.apply(gnp("from-pods", 10, "all()", []api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{Selector: "all()"}}}, nil))
	eventually(t, 15*time.Second, "pods reach each other", reachable(a.ns, b.ip))

	host := func(args ...string) string { return mustNS(t, e.host.ns, args[0], args[1:]...) }
	setName := func() string {
		for _, line := range strings.Split(host("ipset", "list", "-n"), "\n") {
			if strings.HasPrefix(line, "cali40s") {
				return line
			}
		}
		t.Fatalf("no selector IP set:\n%s", host("ipset", "list", "-n"))
		return ""
	}()
	parts := []struct {
		setting string
		drift   func()
		intact  func() error
		set     func(s *api.FelixConfigurationSpec)
	}{
		{"iptablesRefreshInterval", func() {
			host("iptables", "-t", "filter", "-D", "FORWARD", "1")
			host("iptables", "-t", "filter", "-F", "cali-FORWARD")
			host("iptables", "-t", "filter", "-X", "cali-FORWARD")
		}, func() error {
			save := host("iptables-save", "-t", "filter")
			if !strings.Contains(save, "-A FORWARD -m comment") {
				return fmt.Errorf("FORWARD has no hook to cali-FORWARD")
			}
			if !strings.Contains(save, "-A cali-FORWARD ") {
				return fmt.Errorf("chain cali-FORWARD is gone or empty")
			}
			return nil
		}, func(s *api.FelixConfigurationSpec) { s.IptablesRefreshInterval = secs(1) }},
		{"routeRefreshInterval", func() { host("ip", "route", "del", a.ip+"/32") }, func() error {
			if !strings.Contains(host("ip", "route", "show", a.ip+"/32"), "dev cali") {
				return fmt.Errorf("no route to pod %s", a.ip)
			}
			return nil
		}, func(s *api.FelixConfigurationSpec) { s.RouteRefreshInterval = secs(1) }},
		{"ipsetsRefreshInterval", func() { host("ipset", "del", setName, a.ip) }, func() error {
			if !strings.Contains(host("ipset", "list", setName), a.ip) {
				return fmt.Errorf("IP set %s lost pod %s", setName, a.ip)
			}
			return nil
		}, func(s *api.FelixConfigurationSpec) { s.IpsetsRefreshInterval = secs(1) }},
		{"interfaceRefreshInterval", func() { host("sysctl", "-qw", "net.ipv4.ip_forward=0") }, func() error {
			if got := strings.TrimSpace(host("sysctl", "-n", "net.ipv4.ip_forward")); got != "1" {
				return fmt.Errorf("ip_forward is %s", got)
			}
			return nil
		}, func(s *api.FelixConfigurationSpec) { s.InterfaceRefreshInterval = secs(1) }},
	}
	for _, p := range parts {
		if err := p.intact(); err != nil {
			t.Fatalf("before drift: %v", err)
		}
		p.drift()
	}
	// Nothing is repaired while every interval is an hour (an apply does
	// happen: the policy write below makes one).
	e.apply(gnp("nudge", 20, "all()", nil, nil))
	time.Sleep(3 * time.Second)
	for _, p := range parts {
		if p.intact() == nil {
			t.Fatalf("%s: repaired with an interval of an hour: the test proves nothing", p.setting)
		}
	}
	for i, p := range parts {
		e.felixDefault(p.set)
		eventually(t, 30*time.Second, p.setting+" 1s repairs its drift", p.intact)
		for _, later := range parts[i+1:] {
			if later.intact() == nil {
				t.Errorf("%s at 1s repaired %s's part too", p.setting, later.setting)
			}
		}
	}
}

// forwardRules is the FORWARD chain of the agent's namespace, one rule a
// line, with ours shown as "ours".
func forwardRules(t *testing.T, e *cniEnv) []string {
	var out []string
	for _, line := range strings.Split(mustNS(t, e.host.ns, "iptables", "-S", "FORWARD"), "\n") {
		switch {
		case !strings.HasPrefix(line, "-A FORWARD"):
		case strings.Contains(line, "-j cali-FORWARD"):
			out = append(out, "ours")
		default:
			out = append(out, line)
		}
	}
	return out
}

// TestConfigChainInsertModeLive: with foreign rules in FORWARD, the jump to
// cali-FORWARD is first (Insert, Calico's default); chainInsertMode Append
// written while the agent runs moves it after them, Insert moves it back;
// the foreign rules stay as they were throughout.
func TestConfigChainInsertModeLive(t *testing.T) {
	t.Parallel()
	e := newCNIEnv(t, 158)
	foreign := []string{"-A FORWARD -s 192.0.2.1/32 -j ACCEPT", "-A FORWARD -s 192.0.2.2/32 -j DROP"}
	for _, r := range foreign {
		mustNS(t, e.host.ns, "iptables", append([]string{"-A"}, strings.Fields(r)[1:]...)...)
	}
	e.startAgent("node1")
	want := func(what string, rules ...string) {
		t.Helper()
		eventually(t, 20*time.Second, what, func() error {
			if got := forwardRules(t, e); strings.Join(got, "\n") != strings.Join(rules, "\n") {
				return fmt.Errorf("FORWARD is\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(rules, "\n"))
			}
			return nil
		})
	}
	want("Insert (default): our jump first", "ours", foreign[0], foreign[1])
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.ChainInsertMode = "Append" })
	want("Append: our jump last", foreign[0], foreign[1], "ours")
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.ChainInsertMode = "Insert" })
	want("Insert again: our jump first", "ours", foreign[0], foreign[1])
}

// TestConfigNATOutgoingLive: traffic from a natOutgoing pool leaves with
// the host's uplink address (MASQUERADE); natOutgoingAddress written while
// the agent runs makes it leave with that address instead (SNAT), within
// natPortRange; removing both brings MASQUERADE back.
func TestConfigNATOutgoingLive(t *testing.T) {
	t.Parallel()
	const pool, extra = "10.159.0.0/24", "198.51.100.7"
	e, l := policyEnv(t, 159, pool, "")
	e.setNATOutgoing("v4", true)
	mustNS(t, e.host.ns, "ip", "addr", "add", extra+"/32", "dev", "uplink")
	mustNS(t, e.host.outside, "ip", "route", "add", extra+"/32", "via", e.host.hostIP)
	listenPeer(t, e.host.outside, hostPort(e.host.outIP, 8080))
	a := e.newPod(l, "a")
	out := hostPort(e.host.outIP, 8080)
	natRules := func() string { return mustNS(t, e.host.ns, "iptables", "-t", "nat", "-S", "cali-nat-outgoing") }

	sourceSeen(t, a, out, e.host.hostIP, "MASQUERADE: the uplink's address")
	e.felixDefault(func(s *api.FelixConfigurationSpec) {
		p := api.PortRange(40000, 40010)
		s.NATOutgoingAddress, s.NATPortRange = extra, &p
	})
	sourceSeen(t, a, out, extra, "natOutgoingAddress: SNAT to it")
	if r := natRules(); !strings.Contains(r, "-p tcp") || !strings.Contains(r, "--to-source "+extra+":40000-40010") || strings.Contains(r, "MASQUERADE") {
		t.Errorf("cali-nat-outgoing with natOutgoingAddress and natPortRange:\n%s", r)
	}
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.NATOutgoingAddress, s.NATPortRange = "", nil })
	sourceSeen(t, a, out, e.host.hostIP, "both removed: MASQUERADE again")
	if r := natRules(); strings.Contains(r, "SNAT") || strings.Contains(r, "--to-ports") {
		t.Errorf("cali-nat-outgoing after removing both:\n%s", r)
	}
}

// TestConfigMarkMaskLive: iptablesMarkMask written while the agent runs
// moves the accept, pass and scratch marks to the mask's lowest bits
// (0xff000000: 0x1000000, 0x2000000, 0x4000000); policy still decides
// (allowed traffic passes, a deny policy stops it).
func TestConfigMarkMaskLive(t *testing.T) {
	t.Parallel()
	e, l := policyEnv(t, 160, "10.160.0.0/24", "")
	a, b := e.newPod(l, "ma"), e.newPod(l, "mb")
	e.apply(gnp("allow-all", 10, "all()", []api.Rule{{Action: api.ActionAllow}}, []api.Rule{{Action: api.ActionAllow}}))
	eventually(t, 15*time.Second, "pods reach each other", reachable(a.ns, b.ip))
	filter := func() string { return mustNS(t, e.host.ns, "iptables-save", "-t", "filter") }
	if f := filter(); !strings.Contains(f, "0x10000/0x10000") {
		t.Fatalf("default mask: no accept mark 0x10000 in\n%s", f)
	}
	e.felixDefault(func(s *api.FelixConfigurationSpec) { m := uint32(0xff000000); s.IptablesMarkMask = &m })
	eventually(t, 15*time.Second, "marks moved into 0xff000000", func() error {
		f := filter()
		if !strings.Contains(f, "0x1000000/0x1000000") || !strings.Contains(f, "0x2000000") || strings.Contains(f, "0x10000/0x10000") {
			return fmt.Errorf("filter table:\n%s", f)
		}
		return nil
	})
	eventually(t, 15*time.Second, "allowed traffic with the new marks", reachable(a.ns, b.ip))
	e.apply(gnp("deny-b", 5, "all()", []api.Rule{{Action: api.ActionDeny}}, nil))
	eventually(t, 15*time.Second, "deny policy with the new marks", unreachable(a.ns, b.ip))
}

// TestConfigFilterAllowActionLive: an operator's DROP after our jump in
// FORWARD does not stop traffic policy allowed while the allow action is
// Accept (Calico's default); iptablesFilterAllowAction Return written
// while the agent runs hands allowed traffic back to FORWARD, where that
// DROP stops it; Accept again lets it through.
func TestConfigFilterAllowActionLive(t *testing.T) {
	t.Parallel()
	e, l := policyEnv(t, 161, "10.161.0.0/24", "")
	mustNS(t, e.host.ns, "iptables", "-A", "FORWARD", "-j", "DROP")
	a, b := e.newPod(l, "fa"), e.newPod(l, "fb")
	e.apply(gnp("allow-all", 10, "all()", []api.Rule{{Action: api.ActionAllow}}, []api.Rule{{Action: api.ActionAllow}}))
	eventually(t, 15*time.Second, "Accept: allowed traffic skips the foreign DROP", reachable(a.ns, b.ip))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.IptablesFilterAllowAction = "Return" })
	eventually(t, 15*time.Second, "Return: the foreign DROP sees allowed traffic", unreachable(a.ns, b.ip))
	if f := mustNS(t, e.host.ns, "iptables", "-S", "cali-FORWARD"); !strings.Contains(f, "-j RETURN") {
		t.Errorf("cali-FORWARD with Return:\n%s", f)
	}
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.IptablesFilterAllowAction = "Accept" })
	eventually(t, 15*time.Second, "Accept again", reachable(a.ns, b.ip))
}

// TestConfigIPTablesBackendLive: iptablesBackend written while the agent
// runs moves our chains to that backend's tables (iptables-legacy or
// iptables-nft) and removes them from the other; policy keeps working.
func TestConfigIPTablesBackendLive(t *testing.T) {
	e, l := policyEnv(t, 162, "10.162.0.0/24", "")
	a, b := e.newPod(l, "ba"), e.newPod(l, "bb")
	eventually(t, 15*time.Second, "pods reach each other", reachable(a.ns, b.ip))
	has := func(backend string) bool {
		out, _ := inNS(e.host.ns, "iptables-"+backend+"-save", "-t", "filter")
		return strings.Contains(out, ":cali-FORWARD")
	}
	in := func(want, not string) func() error {
		return func() error {
			if !has(want) || has(not) {
				return fmt.Errorf("cali-FORWARD in %s: %v, in %s: %v; want only in %s", want, has(want), not, has(not), want)
			}
			return nil
		}
	}
	native := "nft"
	if v := mustNS(t, e.host.ns, "iptables", "--version"); strings.Contains(v, "legacy") {
		native = "legacy"
	}
	other := map[string]string{"nft": "legacy", "legacy": "nft"}[native]
	eventually(t, 15*time.Second, "Auto: the system's iptables ("+native+")", in(native, other))
	e.felixDefault(func(s *api.FelixConfigurationSpec) {
		s.IptablesBackend = map[string]string{"nft": "NFT", "legacy": "Legacy"}[other]
	})
	eventually(t, 20*time.Second, "moved to "+other, in(other, native))
	e.apply(gnp("deny-b", 5, "all()", []api.Rule{{Action: api.ActionDeny}}, nil))
	eventually(t, 15*time.Second, "policy enforced through "+other, unreachable(a.ns, b.ip))
	e.felixDefault(func(s *api.FelixConfigurationSpec) {
		s.IptablesBackend = map[string]string{"nft": "NFT", "legacy": "Legacy"}[native]
	})
	eventually(t, 20*time.Second, "back to "+native, in(native, other))
	eventually(t, 15*time.Second, "policy enforced through "+native, unreachable(a.ns, b.ip))
}

// TestConfigRemoveExternalRoutesLive: a route someone else puts on a
// workload interface stays, past the grace period, while
// removeExternalRoutes is false; set to true (Calico's default) while the
// agent runs, it goes once the grace period has passed.
func TestConfigRemoveExternalRoutesLive(t *testing.T) {
	t.Parallel()
	e := newCNIEnv(t, 163)
	e.pool("p", "10.163.0.0/24")
	e.felixDefault(func(s *api.FelixConfigurationSpec) {
		off := false
		s.RemoveExternalRoutes, s.RouteRefreshInterval = &off, secs(1)
	})
	l := e.conflist("1.0.0", "extnet", e.calicoPlugin("node1", ""))
	e.startAgent("node1")
	a := e.newPod(l, "xa")
	var iface string
	eventually(t, 15*time.Second, "the pod's route", func() error {
		f := strings.Fields(mustNS(t, e.host.ns, "ip", "route", "show", a.ip+"/32"))
		for i := range f {
			if f[i] == "dev" && i+1 < len(f) && strings.HasPrefix(f[i+1], "cali") {
				iface = f[i+1]
				return nil
			}
		}
		return fmt.Errorf("no route to %s on a cali interface: %v", a.ip, f)
	})
	mustNS(t, e.host.ns, "ip", "route", "add", "192.0.2.0/24", "dev", iface)
	there := func() bool {
		return strings.Contains(mustNS(t, e.host.ns, "ip", "route", "show", "192.0.2.0/24"), iface)
	}
	time.Sleep(40 * time.Second) // past the 30 s grace period, with routes re-read every second
	if !there() {
		t.Fatal("removeExternalRoutes false: the foreign route on the workload interface was removed")
	}
	e.felixDefault(func(s *api.FelixConfigurationSpec) { on := true; s.RemoveExternalRoutes = &on })
	eventually(t, 60*time.Second, "removeExternalRoutes true removes it after the grace period", func() error {
		if there() {
			return fmt.Errorf("192.0.2.0/24 dev %s still there", iface)
		}
		return nil
	})
}

// TestConfigMangleAllowActionLive: with an operator's DROP for a node port
// after our jump in mangle PREROUTING, a pre-DNAT policy allowing the
// port gets traffic past it while the mangle allow action is Accept;
// iptablesMangleAllowAction Return written while the agent runs hands the
// packet back to PREROUTING, where the DROP stops it.
func TestConfigMangleAllowActionLive(t *testing.T) {
	t.Parallel()
	e, a := hostEnv(t, 164, "10.164.0.0/24")
	mustNS(t, e.host.ns, "iptables", "-t", "nat", "-A", "PREROUTING", "-i", "uplink", "-p", "tcp", "--dport", "30080",
		"-j", "DNAT", "--to-destination", hostPort(a.ip, 8080))
	mustNS(t, e.host.ns, "iptables", "-t", "mangle", "-A", "PREROUTING", "-p", "tcp", "--dport", "30080", "-j", "DROP")
	nodePort := tcpProbe(e.host.outside, hostPort(e.host.hostIP, 30080))
	expectTraffic(t, "no pre-DNAT policy: the foreign DROP applies", deny("outside->node:30080", nodePort))
	e.apply(hostKind(gnp("allow-nodeport", 10, "has(hep)", []api.Rule{tcpTo(api.ActionAllow, 30080)}, nil), "preDNAT"))
	expectTraffic(t, "Accept: allowed pre-DNAT traffic skips the foreign DROP", allow("outside->node:30080", nodePort))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.IptablesMangleAllowAction = "Return" })
	expectTraffic(t, "Return: the foreign DROP sees it", deny("outside->node:30080", nodePort))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.IptablesMangleAllowAction = "Accept" })
	expectTraffic(t, "Accept again", allow("outside->node:30080", nodePort))
}

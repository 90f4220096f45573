package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
	t.Parallel()
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

// restoreWaiting finds a running iptables-legacy-restore that uses the
// xtables lock file lockPath and returns its command line.
func restoreWaiting(lockPath string) (string, error) {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cmd, err := os.ReadFile(p + "/cmdline")
		if err != nil || !strings.Contains(string(cmd), "iptables-legacy-restore") {
			continue
		}
		env, _ := os.ReadFile(p + "/environ")
		if strings.Contains(string(env), "XTABLES_LOCKFILE="+lockPath+"\x00") {
			return strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " "), nil
		}
	}
	return "", fmt.Errorf("no iptables-legacy-restore waiting on %s", lockPath)
}

// TestConfigIPTablesLockLive: with the legacy backend (which takes the
// xtables lock; a test-made lock file through XTABLES_LOCKFILE, never the
// host's) and the lock held by the test, the agent's iptables-restore
// waits with --wait <iptablesLockTimeout> --wait-interval
// <iptablesLockProbeInterval in µs>; changed while the agent runs, the
// next restore waits with the new values; once the lock is free the
// policy is programmed.
func TestConfigIPTablesLockLive(t *testing.T) {
	t.Parallel()
	e := newCNIEnv(t, 242)
	e.pool("p", "10.242.0.0/24")
	lockPath := filepath.Join(t.TempDir(), "xtables.lock")
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	e.felixDefault(func(s *api.FelixConfigurationSpec) {
		s.IptablesLockTimeout, s.IptablesLockProbeInterval = secs(7), &api.Duration{Duration: 20 * time.Millisecond}
	})
	agent := startAgentEnv(t, e.host.ns, "node1", e.etcd.Endpoints()[0], e.state,
		[]string{"NO_DEFAULT_POOLS=true", "XTABLES_LOCKFILE=" + lockPath, "FELIX_IPTABLESBACKEND=Legacy"}, "--bgp=false")
	l := e.conflist("1.0.0", "locknet", e.calicoPlugin("node1", ""))
	e.newPod(l, "lp") // policies apply to it, so they reach the filter table
	hold := func() {
		t.Helper()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
	}
	release := func() {
		t.Helper()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); err != nil {
			t.Fatal(err)
		}
	}
	defer release()
	waitsWith := func(args string) func() error {
		return func() error {
			cmd, err := restoreWaiting(lockPath)
			if err != nil {
				return err
			}
			if !strings.Contains(cmd, args) {
				return fmt.Errorf("restore runs as %q, want %q", cmd, args)
			}
			return nil
		}
	}
	programmed := func(policies int) func() error {
		return func() error {
			out := mustNS(t, e.host.ns, "iptables-legacy-save", "-t", "filter")
			if n := strings.Count(out, "\n:cali-pi-"); n != policies {
				return fmt.Errorf("%d policy chains, want %d:\n%s", n, policies, out)
			}
			return nil
		}
	}
	hold()
	e.apply(gnp("lock-a", 10, "all()", []api.Rule{{Action: api.ActionAllow}}, nil))
	eventually(t, 15*time.Second, "restore waits 7 s probing every 20 ms", waitsWith("--noflush --wait 7 --wait-interval 20000"))
	release()
	eventually(t, 15*time.Second, "policy programmed once the lock is free", programmed(1))

	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.IptablesLockTimeout, s.IptablesLockProbeInterval = secs(4), nil })
	// The lock is taken again only once the agent has the new values: a
	// write still due from the first policy (the other tables, its
	// status) would otherwise wait out the old 7 s on it first.
	eventually(t, 15*time.Second, "the agent has the 4 s lock timeout", func() error {
		if !strings.Contains(agent.logs.String(), "setting=iptablesLockTimeout value=4s") {
			return fmt.Errorf("no \"configuration changed\" for iptablesLockTimeout 4s in the agent's log yet")
		}
		return nil
	})
	hold()
	e.apply(gnp("lock-b", 11, "all()", []api.Rule{{Action: api.ActionAllow}}, nil))
	eventually(t, 15*time.Second, "restore waits 4 s probing every 50 ms (default)", waitsWith("--noflush --wait 4 --wait-interval 50000"))
	release()
	eventually(t, 15*time.Second, "second policy programmed", programmed(2))
}

// TestConfigIPv6SupportLive: with an IPv6 pool and a dual-stack pod, the
// agent programs IPv6 (our ip6tables chains, the pod's IPv6 route);
// ipv6Support false written while it runs removes our ip6tables chains and
// IPv6 routes and sets, IPv4 untouched; true brings them back.
func TestConfigIPv6SupportLive(t *testing.T) {
	t.Parallel()
	e, l := policyEnv(t, 243, "10.243.0.0/24", "fd00:243::/64")
	p := e.newPod(l, "v6p")
	if p.ip6 == "" {
		t.Fatal("pod has no IPv6 address")
	}
	v6 := func(want bool) func() error {
		return func() error {
			// Commands may fail while the agent rewrites the tables: retry.
			var out [5]string
			for i, c := range [][]string{{"ip6tables-save", "-t", "filter"}, {"ip", "-6", "route", "show", "proto", "80"},
				{"ipset", "list", "-n"}, {"ip", "-4", "route", "show", "proto", "80"}, {"iptables-save", "-t", "filter"}} {
				o, err := inNS(e.host.ns, c[0], c[1:]...)
				if err != nil {
					return err
				}
				out[i] = o
			}
			chains, routes, sets := strings.Count(out[0], "\n:cali-"), out[1], strings.Count(out[2], "cali60")
			has := strings.Contains(routes, p.ip6)
			if want && (chains == 0 || !has) {
				return fmt.Errorf("IPv6 not programmed: %d ip6tables chains, routes:\n%s", chains, routes)
			}
			if !want && (chains != 0 || has || sets != 0) {
				return fmt.Errorf("IPv6 still programmed: %d ip6tables chains, %d cali60 sets, routes:\n%s", chains, sets, routes)
			}
			if v4 := out[3]; !strings.Contains(v4, p.ip) || strings.Count(out[4], "\n:cali-") == 0 {
				return fmt.Errorf("IPv4 lost: routes\n%s", v4)
			}
			return nil
		}
	}
	// A policy with a source selector gives each family an IP set.
	e.apply(gnp("v6-sel", 10, "all()", []api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{Selector: "all()"}}}, nil))
	eventually(t, 15*time.Second, "IPv6 programmed (ipv6Support default true)", v6(true))
	eventually(t, 15*time.Second, "an IPv6 set for the selector", func() error {
		if out, err := inNS(e.host.ns, "ipset", "list", "-n"); err != nil || !strings.Contains(out, "cali60") {
			return fmt.Errorf("no cali60 set (%v)", err)
		}
		return nil
	})
	off, on := false, true
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.IPv6Support = &off })
	eventually(t, 15*time.Second, "ipv6Support false: no IPv6 programmed", v6(false))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.IPv6Support = &on })
	eventually(t, 15*time.Second, "ipv6Support true: IPv6 back", v6(true))
}

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/store/api"
)

// classicCtl runs the real binary as calicoctl in the host namespace against
// the env's datastore and returns its combined output.
func (e *cniEnv) classicCtl(args ...string) (string, error) {
	full := append([]string{"ctl"}, args...)
	full = append(full, "--etcd-endpoints", e.etcd.Endpoints()[0], "--config", "")
	return inNS(e.host.ns, binary, full...)
}

// classicContainer runs "calicoctl container ..." with the agent's lib dir, so
// that the node name and MTU come from the files calico-node wrote.
func (e *cniEnv) classicContainer(args ...string) (string, error) {
	return e.classicCtl(append(append([]string{"container"}, args...), "--lib-dir", e.state+"/lib")...)
}

func (e *cniEnv) mustClassicCtl(args ...string) string {
	e.t.Helper()
	out, err := e.classicCtl(args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

var classicAddedIP = regexp.MustCompile(`IP (\S+) added to`)

// attachWorkload runs "container add" and returns the address it assigned.
func (e *cniEnv) attachWorkload(ctr, ip string, extra ...string) string {
	e.t.Helper()
	out, err := e.classicContainer(append([]string{"add", ctr, ip}, extra...)...)
	if err != nil {
		e.t.Fatalf("container add %s %s: %v", ctr, ip, err)
	}
	m := classicAddedIP.FindStringSubmatch(out)
	if m == nil {
		e.t.Fatalf("container add %s: no address in %q", ctr, out)
	}
	return m[1]
}

// refusedContainer runs a container command that must fail with a message
// containing want.
func (e *cniEnv) refusedContainer(want string, args ...string) {
	e.t.Helper()
	out, err := e.classicContainer(args...)
	if err == nil || !strings.Contains(out, want) {
		e.t.Errorf("container %v: %v\n%s\nwant a failure saying %q", args, err, out, want)
		return
	}
	e.t.Logf("refused: %s", strings.TrimSpace(out))
}

// sleeperNS runs sleep inside a new network namespace (started with
// "ip netns exec") and returns the namespace and the process's PID.
func sleeperNS(t *testing.T) (ns.NetNS, int) {
	t.Helper()
	n := newNS(t)
	cmd := exec.Command("ip", "netns", "exec", nsName(n), "sleep", "600")
	done, err := startIn(nil, cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	pid := cmd.Process.Pid
	// ip execs sleep once it has entered the namespace.
	eventually(t, 5*time.Second, "sleep running in its namespace", func() error {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) != "sleep" {
			return fmt.Errorf("process %d is %q (%v)", pid, comm, err)
		}
		return nil
	})
	return n, pid
}

// The classic workflow on namespaces: attach by path and by PID, profiles
// decide what talks (enforced by the agent), refusals, clean removal.
func TestContainerAddByPathAndPID(t *testing.T) {
	t.Parallel()
	e := newCNIEnv(t, 51)
	e.pool("p", "10.121.0.0/24")
	e.pool("other", "10.122.0.0/24")
	e.pool("v6", "fd00:121::/64")
	// calicoctl's State column shows what Felix reports, which Calico (and
	// this agent) does only with endpointReportingEnabled.
	on := true
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.EndpointReportingEnabled = &on })
	e.startAgent("node1") // registers the Node and writes the nodename and mtu files

	a, b := newNS(t), newNS(t)
	c, pid := sleeperNS(t)
	ipA := e.attachWorkload(a.Path(), "ipv4")
	ipB := e.attachWorkload(b.Path(), "10.121.0.50")
	ipC := e.attachWorkload(strconv.Itoa(pid), "ipv4", "--interface", "eth0")
	if ipB != "10.121.0.50" || !strings.HasPrefix(ipA, "10.121.0.") || !strings.HasPrefix(ipC, "10.121.0.") {
		t.Fatalf("addresses %s %s %s", ipA, ipB, ipC)
	}
	// Wired as the CNI plugin wires pods: the address, the 169.254.1.1 gateway.
	routes := mustNS(t, c, "ip", "route")
	if !strings.Contains(routes, "default via 169.254.1.1 dev eth0") || !strings.Contains(mustNS(t, c, "ip", "addr", "show", "eth0"), ipC+"/32") {
		t.Errorf("PID container wiring:\n%s", routes)
	}
	if !strings.Contains(mustNS(t, e.host.ns, "ip", "route"), ipA+" dev cali") {
		t.Errorf("no host route for %s", ipA)
	}

	// No profile, no policy: the agent drops the traffic.
	eventually(t, 10*time.Second, "unprofiled containers isolated", unreachable(a, ipC))

	out := e.mustClassicCtl("profile", "add", "web")
	if !strings.Contains(out, "Created profile web") {
		t.Errorf("profile add: %q", out)
	}
	for _, ctr := range []string{a.Path(), strconv.Itoa(pid)} {
		if out, err := e.classicContainer(ctr, "profile", "append", "web"); err != nil || !strings.Contains(out, "web") {
			t.Fatalf("profile append %s: %v %s", ctr, err, out)
		}
	}
	eventually(t, 10*time.Second, "A -> C (both web)", reachable(a, ipC))
	eventually(t, 10*time.Second, "C -> A (both web)", reachable(c, ipA))
	eventually(t, 10*time.Second, "A -> B (B has no profile)", unreachable(a, ipB))
	eventually(t, 10*time.Second, "B -> A (B has no profile)", unreachable(b, ipA))

	// Appending the profile to B lets it in.
	if out, err := e.classicContainer(b.Path(), "profile", "append", "web"); err != nil {
		t.Fatalf("profile append B: %v %s", err, out)
	}
	eventually(t, 10*time.Second, "A -> B once B is web", reachable(a, ipB))

	// Rules added to the profile are enforced; removing them restores traffic.
	e.mustClassicCtl("profile", "web", "rule", "add", "inbound", "--at=1", "deny", "icmp", "from", "cidr", ipA+"/32")
	eventually(t, 10*time.Second, "A -> C denied by the new rule", unreachable(a, ipC))
	eventually(t, 10*time.Second, "B -> C still allowed", reachable(b, ipC))
	e.mustClassicCtl("profile", "web", "rule", "remove", "inbound", "--at=1")
	eventually(t, 10*time.Second, "A -> C allowed again", reachable(a, ipC))

	// A second address, added and removed.
	if out, err := e.classicContainer(a.Path(), "ip", "add", "10.121.0.60"); err != nil || !strings.Contains(out, "IP 10.121.0.60 added") {
		t.Fatalf("ip add: %v %s", err, out)
	}
	eventually(t, 10*time.Second, "C -> A's second address", reachable(c, "10.121.0.60"))
	if out, err := e.classicContainer(a.Path(), "ip", "remove", "10.121.0.60"); err != nil || !strings.Contains(out, "removed") {
		t.Fatalf("ip remove: %v %s", err, out)
	}
	eventually(t, 10*time.Second, "second address gone", unreachable(c, "10.121.0.60"))
	if strings.Contains(mustNS(t, a, "ip", "addr"), "10.121.0.60") {
		t.Errorf("10.121.0.60 left on A's interface")
	}
	if r := mustNS(t, e.host.ns, "ip", "route"); strings.Contains(r, "10.121.0.60") {
		t.Errorf("host route for 10.121.0.60 left:\n%s", r)
	}

	// IPv6 added to IPv4-only containers: the gateway route of the new family comes with it.
	var ip6 [2]string
	for i, ctr := range []string{a.Path(), strconv.Itoa(pid)} {
		out, err := e.classicContainer(ctr, "ip", "add", "ipv6")
		m := classicAddedIP.FindStringSubmatch(out)
		if err != nil || m == nil || !strings.HasPrefix(m[1], "fd00:121::") {
			t.Fatalf("ip add ipv6 %s: %v %s", ctr, err, out)
		}
		ip6[i] = m[1]
	}
	if r := mustNS(t, a, "ip", "-6", "route"); !strings.Contains(r, "default via fe80::ecee:eeff:feee:eeee dev eth1") {
		t.Errorf("no IPv6 default route in A:\n%s", r)
	}
	eventually(t, 10*time.Second, "A -> C over IPv6", reachable(a, ip6[1]))
	if out, err := e.classicContainer(a.Path(), "ip", "remove", ip6[0]); err != nil {
		t.Fatalf("ip remove %s: %v %s", ip6[0], err, out)
	}
	if r := mustNS(t, a, "ip", "-6", "route"); strings.Contains(r, "default") {
		t.Errorf("IPv6 default route left in A after its last IPv6 address went:\n%s", r)
	}

	// Show.
	out, err := e.classicContainer(a.Path(), "endpoint", "show")
	if err != nil || !strings.Contains(out, "node1-namespace-"+strings.ReplaceAll(nsName(a), "-", "--")+"-eth1") || !strings.Contains(out, ipA+"/32") {
		t.Errorf("container endpoint show: %v\n%s", err, out)
	}
	t.Logf("container endpoint show:\n%s", out)
	eventually(t, 20*time.Second, "endpoint show --detailed reports the endpoints up", func() error {
		out := e.mustClassicCtl("endpoint", "show", "--detailed", "--orchestrator=namespace")
		if n := strings.Count(out, "| up "); n != 3 {
			return fmt.Errorf("%d endpoints up:\n%s", n, out)
		}
		t.Logf("endpoint show --detailed:\n%s", out)
		return nil
	})
	if out := e.mustClassicCtl("endpoint", "show", "--detailed", "--workload=pid-"+strconv.Itoa(pid)); strings.Count(out, ipC+"/32") != 1 || strings.Contains(out, ipA+"/32") {
		t.Errorf("endpoint show --workload:\n%s", out)
	}

	// Refusals, each saying why.
	d := newNS(t)
	e.refusedContainer("already has a Calico endpoint", "add", a.Path(), "ipv4")
	e.refusedContainer("cannot use 10.99.0.1: it is outside every enabled IP pool (pools: ", "add", d.Path(), "10.99.0.1")
	e.refusedContainer("cannot use 10.121.0.50: the address is already in use by endpoint default/node1-namespace-", "add", d.Path(), "10.121.0.50")
	e.refusedContainer("10.99.0.0/24 is not the CIDR of an IP pool", "add", d.Path(), "10.99.0.0/24")
	e.refusedContainer("profile nope does not exist", a.Path(), "profile", "append", "nope")
	e.refusedContainer("does not exist", "add", "/var/run/netns/no-such-ns", "ipv4")
	e.refusedContainer("there is no process with PID 999999999", "add", "999999999", "ipv4")
	if out, err := e.classicContainer(a.Path(), "profile", "append", "web"); err != nil || !strings.Contains(out, "Profile web is already in the profiles of") {
		t.Errorf("duplicate append: %v %s", err, out)
	}
	// Nothing was left by the refusals.
	if l := mustNS(t, d, "ip", "-o", "link"); strings.Contains(l, "eth1") {
		t.Errorf("refused adds left an interface in the namespace:\n%s", l)
	}
	e.ipamCheckClean()

	// An address from a named pool CIDR.
	ipD := e.attachWorkload(d.Path(), "10.122.0.0/24")
	if !strings.HasPrefix(ipD, "10.122.0.") {
		t.Errorf("address from pool 10.122.0.0/24: %s", ipD)
	}

	// Removal leaves nothing behind.
	for _, ctr := range []string{a.Path(), b.Path(), strconv.Itoa(pid), d.Path()} {
		if out, err := e.classicContainer("remove", ctr); err != nil || !strings.Contains(out, "Removed Calico networking from") {
			t.Errorf("container remove %s: %v %s", ctr, err, out)
		}
	}
	e.assertClean()
	e.ipamCheckClean()
	if l := mustNS(t, a, "ip", "-o", "link"); strings.Contains(l, "eth1") {
		t.Errorf("container interface left:\n%s", l)
	}
	e.refusedContainer("has no Calico endpoint on node node1", "remove", a.Path())
	t.Logf("profile show --detailed:\n%s", e.mustClassicCtl("profile", "show", "--detailed"))
}

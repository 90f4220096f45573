package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/calico-aio/calico-aio/ipam"
)

const fastpathPkg = "github.com/calico-aio/calico-aio/cni/fastpath"

// heavyModules are descriptor registration, gRPC, the etcd API and
// client, GoBGP, client-go, Prometheus: the in-process plugin initialises
// what it needs of them, the fast path none (nothing outside the standard
// library).
var heavyModules = []string{
	"google.golang.org/protobuf/", "google.golang.org/grpc", "github.com/golang/protobuf", "github.com/gogo/protobuf",
	"go.etcd.io/etcd/api", "go.etcd.io/etcd/client", "go.etcd.io/etcd/server", "github.com/osrg/gobgp",
	"k8s.io/client-go", "k8s.io/apimachinery", "k8s.io/api/", "github.com/prometheus/",
}

// otherRolesOnly are packages with init work that the CNI plugin does not
// import (the embedded etcd server, the agent's configuration, calicoctl):
// the in-process plugin runs before their inits.
var otherRolesOnly = []string{
	"go.etcd.io/etcd/server/v3/embed", "go.etcd.io/etcd/server/v3/etcdserver",
	"github.com/calico-aio/calico-aio/felix/config", "github.com/calico-aio/calico-aio/ctl",
}

// maxBeforeFastpath bounds the packages initialised before the fast path
// answers: it imports only syscall and what Go initialises before it (15
// packages, all of the standard library, with Go 1.26).
const maxBeforeFastpath = 30

// standard: pkg is of the standard library (no dot in its first element).
func standard(pkg string) bool {
	first, _, _ := strings.Cut(pkg, "/")
	return !strings.Contains(first, ".")
}

// initOrder is the package initialisation order GODEBUG=inittrace=1 printed.
func initOrder(stderr string) []string {
	var out []string
	for _, line := range strings.Split(stderr, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "init" && strings.HasPrefix(f[2], "@") {
			out = append(out, f[1])
		}
	}
	return out
}

// ownInitAllocs is what this module's packages allocate in their inits,
// summed from GODEBUG=inittrace=1's lines ("init P @t ms, c ms clock, B
// bytes, N allocs").
func ownInitAllocs(stderr string) int {
	sum := 0
	for _, line := range strings.Split(stderr, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[0] == "init" && strings.HasPrefix(f[1], "github.com/calico-aio/calico-aio/") && f[len(f)-1] == "allocs" {
			n, _ := strconv.Atoi(f[len(f)-2])
			sum += n
		}
	}
	return sum
}

// maxOwnInitAllocs bounds ownInitAllocs: every process of the binary, the
// in-process CNI fallback included, runs every linked package's init, so
// ours set up at first use (sync.OnceValue), not at init (#25: 3,083
// allocations before, 1,016 after; felix/config's settings table is most
// of what is left).
const maxOwnInitAllocs = 1200

// netconf is a single calico netconf (not a list) for exec'ing the plugin.
func (e *cniEnv) netconf(name, node, extraIPAM string) string {
	return `{"cniVersion":"1.0.0","name":"` + name + `",` + strings.TrimPrefix(e.calicoPlugin(node, extraIPAM), "{")
}

// execPlugin runs the plugin from the host namespace with the CNI
// variables in env, as a runtime does.
func (e *cniEnv) execPlugin(plugin string, env []string, stdin string) (stdout, stderr string, err error) {
	cmd := exec.Command(filepath.Join(e.bin, plugin))
	cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "CNI_PATH=" + e.bin}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = e.inHost(cmd.Run)
	return out.String(), errb.String(), err
}

func cniEnvFor(cmd, container, netns string) []string {
	return []string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=" + container, "CNI_NETNS=" + netns, "CNI_IFNAME=eth0"}
}

// TestCNIFastPathInitOrder holds the one unusual thing in the binary: with
// calico-node serving the socket, a CNI call is answered and the process
// exits while only cheap packages have been initialised.
func TestCNIFastPathInitOrder(t *testing.T) {
	e := newCNIEnv(t, 66)
	e.pool("v4", "10.110.0.0/24")
	a := e.startAgent("node1")
	conf := e.netconf("fast", "node1", "")
	pod := newNS(t)

	out, stderr, err := e.execPlugin("calico", append(cniEnvFor("ADD", "fast1", pod.Path()), "GODEBUG=inittrace=1"), conf)
	if err != nil {
		t.Fatalf("ADD: %v\n%s\n%s", err, out, stderr)
	}
	var res struct {
		IPs []struct{ Address string } `json:"ips"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.IPs) != 1 || !strings.HasPrefix(res.IPs[0].Address, "10.110.0.") {
		t.Fatalf("ADD result %q: %v", out, err)
	}
	// The runtime traces a package when its init returns: exiting inside
	// the fast path's init leaves it (and everything after it) out.
	order := initOrder(stderr)
	if len(order) == 0 || slices.Contains(order, fastpathPkg) {
		t.Fatalf("the fast path did not exit in its own init; %d packages traced, ending %v", len(order), order[max(0, len(order)-5):])
	}
	for _, p := range order {
		if !standard(p) {
			t.Errorf("%s was initialised before the fast path answered", p)
		}
	}
	if len(order) > maxBeforeFastpath {
		t.Errorf("%d packages initialised before the fast path answered, want at most %d: %v", len(order), maxBeforeFastpath, order)
	}
	if n := a.servedCalls(); n != 1 {
		t.Errorf("agent served %d calls, want 1", n)
	}
	t.Logf("%d packages initialised before the fast path answered", len(order))

	// In-process, the same binary goes on to the plugin's own heavy
	// packages (the list above names packages it really initialises) and
	// runs the call in cni/inproc's init: the packages only the agent and
	// calicoctl link are left out.
	out, stderr, err = e.execPlugin("calico", append(cniEnvFor("ADD", "fast2", newNS(t).Path()), "GODEBUG=inittrace=1", "CALICO_CNI_IN_PROCESS=1"), conf)
	if err != nil {
		t.Fatalf("in-process ADD: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	full := initOrder(stderr)
	if !slices.Contains(full, fastpathPkg) {
		t.Fatalf("in-process, %s's init was not traced: the check above proves nothing", fastpathPkg)
	}
	if n := ownInitAllocs(stderr); n == 0 || n > maxOwnInitAllocs {
		t.Errorf("our packages' inits allocated %d times, want 1-%d: set up at first use, not at init", n, maxOwnInitAllocs)
	}
	for _, p := range full {
		for _, m := range heavyModules {
			if strings.HasPrefix(p, m) {
				seen[m] = true
			}
		}
	}
	for _, m := range []string{"google.golang.org/protobuf/", "google.golang.org/grpc", "go.etcd.io/etcd/api", "k8s.io/client-go"} {
		if !seen[m] {
			t.Errorf("the in-process plugin initialised nothing of %s: the check above proves nothing for it", m)
		}
	}
	ver := exec.Command(binary, "version")
	ver.Env = []string{"GODEBUG=inittrace=1"}
	everything, err := ver.CombinedOutput()
	if err != nil {
		t.Fatalf("calico-aio version: %v\n%s", err, everything)
	}
	for _, p := range otherRolesOnly {
		if slices.Contains(full, p) {
			t.Errorf("the in-process plugin initialised %s, which only the other roles need", p)
		}
		if !slices.Contains(initOrder(string(everything)), p) {
			t.Errorf("%s is not initialised by the binary at all: the check above proves nothing for it", p)
		}
	}
	if n := a.servedCalls(); n != 1 {
		t.Errorf("agent served %d calls after an in-process one, want 1", n)
	}
	for _, c := range []string{"fast1", "fast2"} {
		if out, _, err := e.execPlugin("calico", cniEnvFor("DEL", c, ""), conf); err != nil {
			t.Errorf("DEL %s: %v %s", c, err, out)
		}
	}
	e.assertClean()
}

// waitExit waits for the agent process to end (it kills itself at a fault
// point) and leaves its status for the harness's stop.
func (a *agentProc) waitExit(t *testing.T) {
	t.Helper()
	select {
	case err := <-a.done:
		a.done <- err
	case <-time.After(20 * time.Second):
		t.Fatal("calico-node did not die at the fault point")
	}
}

// TestCNIAgentKilledMidCall: the agent dies in the middle of an ADD; the
// client sees the connection drop, runs the ADD in-process, and that finds
// and repairs what the agent did: one address, one veth, ipam check clean.
func TestCNIAgentKilledMidCall(t *testing.T) {
	e := newCNIEnv(t, 67)
	e.pool("v4", "10.111.0.0/24")
	l := e.conflist("1.0.0", "killed", e.calicoPlugin("node1", ""))
	for _, fault := range []string{"after-ipam", "after-wiring"} {
		t.Run(fault, func(t *testing.T) {
			e.t = t
			// The agent process's own environment arms the fault (calls
			// carrying CALICO_CNI_FAULT are left to the in-process plugin).
			t.Setenv("CALICO_CNI_FAULT", fault)
			a := e.startAgent("node1")
			os.Unsetenv("CALICO_CNI_FAULT")
			pod := newNS(t)
			rt := &libcni.RuntimeConf{ContainerID: "k-" + fault, NetNS: pod.Path(), IfName: "eth0"}
			res, err := e.add(l, rt)
			if err != nil {
				t.Fatalf("ADD after the agent died: %v\n%s", err, a.logs.String())
			}
			a.waitExit(t)
			if a.servedCalls() != 0 {
				t.Fatalf("the agent answered before dying:\n%s", a.logs.String())
			}
			v4, _ := podAddrs(res)
			ips, err := ipam.New(e.cl).IPsByHandle(context.Background(), "killed."+rt.ContainerID)
			if err != nil || len(ips) != 1 || ips[0].String() != v4 {
				t.Errorf("handle holds %v (%v), want exactly the result's %s", ips, err, v4)
			}
			if links := e.hostLinks(); len(links) != 1 {
				t.Errorf("host links %v, want one", links)
			}
			if got := mustNS(t, pod, "ip", "-4", "-o", "addr", "show", "dev", "eth0"); strings.Count(got, "inet ") != 1 || !strings.Contains(got, v4+"/32") {
				t.Errorf("pod eth0 addresses:\n%s\nwant exactly %s/32", got, v4)
			}
			e.ipamCheckClean()
			if err := e.del(l, rt); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			e.assertClean()
		})
	}
}

// TestCNIDelWithAgentDown: agent and datastore both down, DEL journals
// the release as it always has; once both are back the journal is
// replayed and ipam check is clean.
func TestCNIDelWithAgentDown(t *testing.T) {
	t.Parallel()
	e := newCNIEnv(t, 68)
	e.pool("v4", "10.112.0.0/24")
	l := e.conflist("1.0.0", "down", e.calicoPlugin("node1", ""))
	a := e.startAgent("node1")
	pod := newNS(t)
	rt := &libcni.RuntimeConf{ContainerID: "down1", NetNS: pod.Path(), IfName: "eth0"}
	if _, err := e.add(l, rt); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if a.servedCalls() != 1 {
		t.Fatalf("agent served %d calls, want the ADD", a.servedCalls())
	}
	if err := a.cmd.Process.Kill(); err != nil { // the socket file stays behind, refusing
		t.Fatal(err)
	}
	a.waitExit(t)
	e.etcd.Stop()
	if err := e.del(l, rt); err != nil {
		t.Fatalf("DEL with agent and datastore down: %v", err)
	}
	journal := filepath.Join(e.state, "lib", "pending-releases", "down.down1")
	if _, err := os.Stat(journal); err != nil {
		t.Fatalf("no journaled release: %v", err)
	}
	if l := e.hostLinks(); len(l) != 0 {
		t.Errorf("DEL left links %v", l)
	}
	e.etcd.Restart(t)
	e.startAgent("node1") // replays the journal
	eventually(t, 20*time.Second, "journal replayed", func() error {
		if _, err := os.Stat(journal); err == nil {
			return fmt.Errorf("%s still there", journal)
		}
		return nil
	})
	e.ipamCheckClean()
	e.assertClean()
}

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/internal/freeport"
	"github.com/containernetworking/plugins/pkg/ns"
)

// agentProc is calico-node running inside a test host namespace.
type agentProc struct {
	t      testing.TB
	ns     ns.NetNS
	cmd    *exec.Cmd
	logs   *lockedBuffer
	health string
	done   chan error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// agentBuild is a build of calico-node other than the test's, for
// benchmarks that measure two builds side by side: bin (empty: the test's
// binary) run with env added to the test's environment.
type agentBuild struct {
	bin string
	env []string
}

// startAgent runs the binary (e.agent's, when set) as calico-node in the
// host namespace of e.
func (e *cniEnv) startAgent(node string, extra ...string) *agentProc {
	e.t.Helper()
	env := append([]string{noDefaultPools}, e.agent.env...)
	args := etcdArgs(e.etcd.Endpoints()[0], append([]string{"--bgp=false"}, extra...)...)
	a := launchAgentBin(e.t, e.agent.bin, e.host.ns, node, e.state, env, args...)
	a.waitReady()
	return a
}

// noDefaultPools is the harness's default environment for calico-node:
// tests make their own pools (often after the agents start).
const noDefaultPools = "NO_DEFAULT_POOLS=true"

// etcdArgs are calico-node's arguments for the etcd at endpoint, then extra.
func etcdArgs(endpoint string, extra ...string) []string {
	return append([]string{"--etcd-endpoints", endpoint}, extra...)
}

// startAgentIn runs calico-node inside namespace n with its state under
// stateDir and waits until it reports ready. Tests make their own pools
// (often after the agents start), so the harness turns off the default
// pools calico-node would otherwise create (NO_DEFAULT_POOLS=true).
func startAgentIn(t testing.TB, n ns.NetNS, node, etcdEndpoint, stateDir string, extra ...string) *agentProc {
	t.Helper()
	return startAgentEnv(t, n, node, etcdEndpoint, stateDir, []string{noDefaultPools}, extra...)
}

// startAgentEnv is startAgentIn with env added to the test's environment
// instead of NO_DEFAULT_POOLS=true.
func startAgentEnv(t testing.TB, n ns.NetNS, node, etcdEndpoint, stateDir string, env []string, extra ...string) *agentProc {
	t.Helper()
	return startAgentWith(t, n, node, stateDir, env, etcdArgs(etcdEndpoint, extra...)...)
}

// startAgentWith is startAgentEnv with the datastore left to env and args
// (no --etcd-endpoints).
func startAgentWith(t testing.TB, n ns.NetNS, node, stateDir string, env []string, extra ...string) *agentProc {
	t.Helper()
	a := launchAgentWith(t, n, node, stateDir, env, extra...)
	a.waitReady()
	return a
}

// launchAgentWith is startAgentWith without waiting for readiness.
func launchAgentWith(t testing.TB, n ns.NetNS, node, stateDir string, env []string, extra ...string) *agentProc {
	t.Helper()
	return launchAgentBin(t, "", n, node, stateDir, env, extra...)
}

// launchAgentBin is launchAgentWith running bin (empty: the test's binary).
func launchAgentBin(t testing.TB, bin string, n ns.NetNS, node, stateDir string, env []string, extra ...string) *agentProc {
	t.Helper()
	if bin == "" {
		bin = binary
	}
	a := &agentProc{t: t, ns: n, logs: &lockedBuffer{}, health: fmt.Sprintf("127.0.0.1:%d", freePortIn(t, n)), done: make(chan error, 1)}
	args := append([]string{"node", "--nodename", node,
		"--lib-dir", stateDir + "/lib", "--run-dir", stateDir + "/run", "--health-addr", a.health,
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", freePortIn(t, n)), "--resync-interval", "3s"}, extra...)
	a.cmd = exec.Command(bin, args...)
	a.cmd.Env = append(os.Environ(), env...)
	a.cmd.Stdout, a.cmd.Stderr = a.logs, a.logs
	done, err := startIn(n, a.cmd)
	if err != nil {
		t.Fatal(err)
	}
	go func() { a.done <- <-done }()
	t.Cleanup(func() {
		a.stop()
		if t.Failed() {
			t.Logf("calico-node %s log:\n%s", node, a.logs.String())
		}
	})
	return a
}

// freePortIn is a TCP port free on namespace n's loopback now: asked of n
// itself, since the agent binds there, where the node's etcd may already
// hold ports that are free in the test's own namespace.
func freePortIn(t testing.TB, n ns.NetNS) int {
	t.Helper()
	var port int
	err := n.Do(func(ns.NetNS) error {
		var err error
		port, err = freeport.Loopback()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// waitReady polls /readiness from inside the host namespace.
func (a *agentProc) waitReady() {
	a.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if code, _ := httpGetIn(a.ns, "http://"+a.health+"/readiness"); code == 200 {
			return
		}
		select {
		case err := <-a.done:
			a.t.Fatalf("calico-node exited: %v\n%s", err, a.logs.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	_ = a.cmd.Process.Signal(syscall.SIGQUIT) // goroutine dump into the log
	select {
	case <-a.done:
	case <-time.After(5 * time.Second):
	}
	a.t.Fatalf("calico-node not ready after 30s\n%s", a.logs.String())
}

// httpGetIn fetches a URL with connections dialled from inside namespace n
// (net/http dials on its own goroutines, which would be outside it).
func httpGetIn(n ns.NetNS, url string) (int, string) {
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := n.Do(func(ns.NetNS) error {
			var d net.Dialer
			var err error
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}}
	defer tr.CloseIdleConnections()
	c := http.Client{Timeout: 2 * time.Second, Transport: tr}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// stop sends SIGTERM and waits (idempotent).
func (a *agentProc) stop() {
	if a.cmd.ProcessState != nil || a.cmd.Process == nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
}

// eventually retries cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	// Poll soon at first (the tests log how quickly things happen), then
	// every 100 ms.
	for pause := 10 * time.Millisecond; time.Now().Before(deadline); pause = min(2*pause, 100*time.Millisecond) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(pause)
	}
	t.Fatalf("%s: still failing after %s: %v", what, timeout, err)
}

// reachable is nil when from can ping dst.
func reachable(from ns.NetNS, dst string) func() error {
	return func() error { return ping(from, dst) }
}

// unreachable is nil when from cannot ping dst.
func unreachable(from ns.NetNS, dst string) func() error {
	return func() error {
		if err := ping(from, dst); err == nil {
			return fmt.Errorf("%s still reachable", dst)
		}
		return nil
	}
}

func hasLine(text, want string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, want) {
			return true
		}
	}
	return false
}

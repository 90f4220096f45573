// MPTCP sockets break TCP_MD5SIG (GOBGP-NOTES trap 1); the test binary needs
// the same setting as main.go.
//go:debug multipathtcp=0

package bgp

// Test harness.
//
// GoBGP listens and dials from its own goroutines, which are not locked to an
// OS thread, so wrapping Start in ns.Do would not keep its sockets in a test
// namespace. Instead TestMain re-executes the test binary as a child process
// created in a fresh, anonymous network namespace (CLONE_NEWNET): every thread
// of the test process, and every helper process it starts, lives there. The
// namespace vanishes with the process, also after a crash; the host namespace
// is never touched. Inside, lo is brought up and carries the speakers'
// addresses 10.200.0.1-9/32; each test uses its own TCP port.

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

const (
	envNetns  = "CALICO_AIO_BGP_TEST_NETNS"  // set in the re-executed child
	envHelper = "CALICO_AIO_BGP_TEST_HELPER" // helper speaker process spec
	mesh      = "node-to-node mesh"
)

var netnsErr error // why the namespace tests cannot run here

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(envHelper) != "":
	case os.Getenv(envNetns) == "1":
		netnsErr = setupNetns()
	case os.Geteuid() != 0:
		netnsErr = errors.New("BGP tests need root for a network namespace")
	default:
		code, err := runInNewNetns()
		if err == nil {
			os.Exit(code)
		}
		netnsErr = err
	}
	os.Exit(m.Run())
}

// runInNewNetns runs this test binary again, with the same flags, in a new
// network namespace, and returns its exit code.
func runInNewNetns() (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = append(os.Environ(), envNetns+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		return max(ee.ExitCode(), 1), nil
	}
	return 0, fmt.Errorf("re-running the tests in a new network namespace: %w", err)
}

func setupNetns() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return err
	}
	for i := 1; i <= 9; i++ {
		a := &netlink.Addr{IPNet: netlink.NewIPNet(nodeAddr(i).AsSlice())}
		if err := netlink.AddrReplace(lo, a); err != nil {
			return fmt.Errorf("adding %v to lo: %w", nodeAddr(i), err)
		}
	}
	return nil
}

// needNetns skips a test that needs the namespace, except in CI, where a
// missing prerequisite is a failure.
func needNetns(t testing.TB) {
	t.Helper()
	if netnsErr == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%v (CI=true: not skipping)", netnsErr)
	}
	t.Skip(netnsErr)
}

var lastPort atomic.Int32

func init() { lastPort.Store(10178) }

func nextPort() int { return int(lastPort.Add(1)) }

func nodeAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 200, 0, byte(i)}) }

func testLogLevel() slog.Level {
	if os.Getenv("BGP_TEST_LOG") == "debug" {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: testLogLevel()}))
}

// node is a started speaker at 10.200.0.<i>; its route events are collected
// unless the test reads Routes() itself.
type node struct {
	*Speaker
	addr netip.Addr
	port int
	got  *collector
}

func startNode(t testing.TB, i, port int, collect bool, mod func(*Config)) *node {
	t.Helper()
	cfg := Config{
		RouterID: nodeAddr(i), ASN: 64512, ListenPort: port,
		ListenAddrs: []netip.Addr{nodeAddr(i)},
		NextHopV6:   netip.MustParseAddr(fmt.Sprintf("fd00:200::%d", i)),
		Logger:      testLogger(), LogLevel: testLogLevel(),
	}
	if mod != nil {
		mod(&cfg)
	}
	s := New(cfg)
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("starting speaker %d: %v", i, err)
	}
	t.Cleanup(func() { s.Stop(false) })
	n := &node{Speaker: s, addr: nodeAddr(i), port: port}
	if collect {
		n.got = newCollector(s.Routes())
	}
	return n
}

// peer is how other nodes configure n as their peer.
func (n *node) peer(local *node, passive bool, typ string) Peer {
	return Peer{Address: n.addr, Port: n.port, LocalAddress: local.addr, Passive: passive,
		Type: typ, Families: IPv4Unicast | IPv6Unicast}
}

type collector struct {
	mu     sync.Mutex
	cur    map[netip.Prefix][]netip.Addr
	events []RouteEvent
}

func newCollector(ch <-chan []RouteEvent) *collector {
	c := &collector{cur: map[netip.Prefix][]netip.Addr{}}
	go func() {
		for batch := range ch {
			c.mu.Lock()
			for _, ev := range batch {
				c.events = append(c.events, ev)
				if len(ev.NextHops) == 0 {
					delete(c.cur, ev.Prefix)
				} else {
					c.cur[ev.Prefix] = ev.NextHops
				}
			}
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *collector) hops(p netip.Prefix) []netip.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur[p]
}

// since returns the events from index i on, and the index to continue from.
func (c *collector) since(i int) ([]RouteEvent, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events[i:]), len(c.events)
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitRoute waits until n's current event state for p has exactly hops (none:
// withdrawn).
func waitRoute(t testing.TB, n *node, p string, hops ...string) {
	t.Helper()
	pfx := netip.MustParsePrefix(p)
	want := make([]netip.Addr, 0, len(hops))
	for _, h := range hops {
		want = append(want, netip.MustParseAddr(h))
	}
	waitFor(t, 10*time.Second, fmt.Sprintf("%v: route %v via %v", n.addr, p, hops), func() bool {
		return slices.Equal(n.got.hops(pfx), want)
	})
}

func peerStatus(n *node, peer netip.Addr) (PeerStatus, bool) {
	for _, st := range n.PeerStatus() {
		if st.Address == peer {
			return st, true
		}
	}
	return PeerStatus{}, false
}

func waitEstablished(t testing.TB, n *node, peer netip.Addr, timeout time.Duration) PeerStatus {
	t.Helper()
	var st PeerStatus
	waitFor(t, timeout, fmt.Sprintf("%v: session with %v established", n.addr, peer), func() bool {
		st, _ = peerStatus(n, peer)
		return st.State == "Established"
	})
	return st
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

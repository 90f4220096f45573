package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/internal/nstest"
)

// needRoot skips a kernel test when not root, except in CI where a missing
// prerequisite is a failure.
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("kernel tests need root (CI=true: not skipping)")
	}
	t.Skip("kernel tests need root")
}

// newNS creates a network namespace that is removed when the test ends.
func newNS(t testing.TB) ns.NetNS {
	t.Helper()
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("creating netns: %v", err)
	}
	untrack := trackNS(n)
	t.Cleanup(func() {
		if err := nstest.RemoveNS(n); err != nil {
			// Left tracked: the sweep at exit tries again and fails the run.
			t.Errorf("removing network namespace %s: %v", nsName(n), err)
			return
		}
		untrack()
	})
	mustDo(t, n, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	return n
}

// nsName is the name `ip netns` knows a namespace by.
func nsName(n ns.NetNS) string { return filepath.Base(n.Path()) }

func mustDo(t testing.TB, n ns.NetNS, f func() error) {
	t.Helper()
	if err := n.Do(func(ns.NetNS) error { return f() }); err != nil {
		t.Fatal(err)
	}
}

// inNS runs a command with its process in namespace n.
func inNS(n ns.NetNS, name string, args ...string) (string, error) {
	var out []byte
	err := n.Do(func(ns.NetNS) error {
		cmd := exec.Command(name, args...)
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		err := cmd.Run()
		out = b.Bytes()
		return err
	})
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func mustNS(t testing.TB, n ns.NetNS, name string, args ...string) string {
	t.Helper()
	out, err := inNS(n, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ping reports whether one ICMP echo from namespace n to addr is answered.
func ping(n ns.NetNS, addr string) error {
	flag := "-4"
	if strings.Contains(addr, ":") {
		flag = "-6"
	}
	_, err := inNS(n, "ping", flag, "-c1", "-W1", addr)
	return err
}

// testHost is a network namespace standing in for a node's host, with an
// uplink to an "outside" namespace, a default route over it (so proxy ARP
// answers pods' ARP for 169.254.1.1) and forwarding off, as on a fresh
// Linux host: calico-node turns it on.
type testHost struct {
	ns      ns.NetNS
	outside ns.NetNS
	hostIP  string // on the uplink
	outIP   string // the outside end
}

func newTestHost(t testing.TB, index int) *testHost {
	t.Helper()
	needRoot(t)
	h := &testHost{ns: newNS(t), outside: newNS(t),
		hostIP: fmt.Sprintf("172.31.%d.1", index), outIP: fmt.Sprintf("172.31.%d.2", index)}
	mustNS(t, h.ns, "ip", "link", "add", "uplink", "type", "veth", "peer", "name", "outlink", "netns", nsName(h.outside))
	mustNS(t, h.ns, "ip", "addr", "add", h.hostIP+"/30", "dev", "uplink")
	mustNS(t, h.ns, "ip", "link", "set", "uplink", "up")
	mustNS(t, h.ns, "ip", "route", "add", "default", "via", h.outIP, "dev", "uplink", "onlink")
	freshHostForwarding(t, h.ns) // calico-node turns it on
	mustNS(t, h.outside, "ip", "addr", "add", h.outIP+"/30", "dev", "outlink")
	mustNS(t, h.outside, "ip", "link", "set", "dev", "outlink", "up")
	return h
}

// freshHostForwarding sets IPv4 and IPv6 forwarding off in n, the default
// of a fresh Linux host: a new namespace would otherwise inherit the IPv4
// setting of the machine running the tests. calico-node must turn them on.
func freshHostForwarding(t testing.TB, n ns.NetNS) {
	t.Helper()
	mustNS(t, n, "sysctl", "-qw", "net.ipv4.ip_forward=0", "net.ipv6.conf.all.forwarding=0")
}

// forwardingOf is "<net.ipv4.ip_forward> <net.ipv6.conf.all.forwarding>" in n.
func forwardingOf(t testing.TB, n ns.NetNS) string {
	t.Helper()
	return strings.Join(strings.Fields(mustNS(t, n, "sysctl", "-n", "net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding")), " ")
}

// forwardingOn turns forwarding on in h, standing in for calico-node in a
// test that runs the CNI plugin without it.
func (h *testHost) forwardingOn(t testing.TB) {
	t.Helper()
	mustNS(t, h.ns, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
}

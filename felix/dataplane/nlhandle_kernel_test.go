package dataplane

import (
	"fmt"
	"maps"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// nlSockets are the rtnetlink sockets this process holds in namespace n
// (found by the namespace's cookie), as "socket:[inode]".
func nlSockets(t *testing.T, n ns.NetNS) []string {
	t.Helper()
	var cookie uint64
	if err := n.Do(func(ns.NetNS) error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		cookie, err = unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
		return err
	}); err != nil {
		t.Fatalf("the namespace's cookie: %v", err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || !strings.HasPrefix(target, "socket:") {
			continue
		}
		dom, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
		proto, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
		c, err3 := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
		if err1 == nil && err2 == nil && err3 == nil && dom == unix.AF_NETLINK && proto == unix.NETLINK_ROUTE && c == cookie {
			out = append(out, target)
		}
	}
	return out
}

// handleTimeouts are the (send, receive) timeouts of h's sockets. The
// library (v1.3.1) keeps them on its socket objects and applies them as
// read/write deadlines (not SO_RCVTIMEO), and the handle has no getter:
// the test reads the handle's socket map.
func handleTimeouts(t *testing.T, h *netlink.Handle) [][2]time.Duration {
	t.Helper()
	f := reflect.ValueOf(h).Elem().FieldByName("sockets")
	if !f.IsValid() {
		t.Fatal("netlink.Handle has no sockets field (library changed)")
	}
	socks := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(map[int]*nl.SocketHandle)
	var out [][2]time.Duration
	for _, sh := range socks {
		snd, rcv := sh.Socket.GetTimeouts()
		out = append(out, [2]time.Duration{snd, rcv})
	}
	return out
}

// TestConfigNetlinkTimeoutLive: the dataplane programs routes and
// neighbours through its own rtnetlink socket, made in the namespace it
// runs in with netlinkTimeout as its send and receive timeout; a changed
// timeout replaces the socket (the old one is closed) and programming
// goes on through the new one.
func TestConfigNetlinkTimeoutLive(t *testing.T) {
	needKernel(t)
	n := newKernelNS(t, wrapTools(t))
	dp := New(Config{IPv6: true})
	t.Cleanup(dp.Close)
	des := Desired{InSync: true, Routes: map[netip.Prefix]RouteTarget{}}
	addPod := func(i int) {
		iface, addr := fmt.Sprintf("calitest%d", i), netip.MustParseAddr(fmt.Sprintf("10.65.0.%d", i))
		des.Endpoints = append(des.Endpoints, LocalEndpoint{Iface: iface, Addrs: []netip.Addr{addr}, MAC: fmt.Sprintf("ee:ee:ee:00:00:0%d", i)})
		des.Routes[netip.PrefixFrom(addr, 32)] = RouteTarget{Iface: iface}
	}
	apply := func() {
		t.Helper()
		d := des
		d.Routes, d.Endpoints = maps.Clone(des.Routes), slices.Clone(des.Endpoints) // the managers keep what they are given
		if err := n.Do(func(ns.NetNS) error { return dp.Apply(d) }); err != nil {
			t.Fatalf("apply: %v", err)
		}
	}
	programmed := func(i int) {
		t.Helper()
		ip := fmt.Sprintf("10.65.0.%d", i)
		if r := run(t, n, "ip", "route", "show", ip); !strings.Contains(r, fmt.Sprintf("dev calitest%d", i)) {
			t.Errorf("no route to %s: %q", ip, r)
		}
		if nb := run(t, n, "ip", "neigh", "show", ip); !strings.Contains(nb, fmt.Sprintf("ee:ee:ee:00:00:0%d PERMANENT", i)) {
			t.Errorf("no permanent neighbour %s: %q", ip, nb)
		}
	}
	var last string
	socket := func(want time.Duration) {
		t.Helper()
		socks := nlSockets(t, n)
		if len(socks) != 1 || socks[0] == last {
			t.Fatalf("our rtnetlink sockets in the namespace: %v, want one new one (was %s)", socks, last)
		}
		last = socks[0]
		if got := handleTimeouts(t, dp.nl.raw); len(got) != 1 || got[0] != [2]time.Duration{want, want} {
			t.Fatalf("the handle's (send, receive) timeouts: %v, want %s", got, want)
		}
		if d := netlink.GetSocketTimeout(); d != 60*time.Second {
			t.Errorf("the library's process-wide default timeout changed: %s", d)
		}
	}
	if got := nlSockets(t, n); len(got) != 0 {
		t.Fatalf("rtnetlink sockets before the first apply: %v", got)
	}

	addPod(1)
	des.NetlinkTimeout = 3 * time.Second
	apply()
	socket(3 * time.Second)
	programmed(1)

	addPod(2)
	des.NetlinkTimeout = 7500 * time.Millisecond
	apply()
	socket(7500 * time.Millisecond) // the 3s socket is closed
	programmed(1)
	programmed(2)

	addPod(3)
	des.NetlinkTimeout = 0 // Calico's default
	apply()
	socket(10 * time.Second)
	programmed(3)

	des.NetlinkTimeout = 2 * time.Second // nothing else changes: the socket is still replaced
	apply()
	socket(2 * time.Second)

	addPod(4)
	des.NetlinkTimeout = -1 // netlinkTimeout 0: none
	apply()
	socket(0)
	programmed(4)

	apply() // same timeout, same namespace: the socket stays
	if socks := nlSockets(t, n); len(socks) != 1 || socks[0] != last {
		t.Errorf("an apply without a change replaced the socket: %v (was %s)", socks, last)
	}
	dp.Close()
	if got := nlSockets(t, n); len(got) != 0 {
		t.Fatalf("rtnetlink sockets after Close: %v", got)
	}
}

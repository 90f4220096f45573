package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// Helpers for the overlay benchmarks (overlay_bench_test.go).

// needIperf3 fails (CI=true) or skips when iperf3 is missing.
func needIperf3(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("iperf3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("iperf3 not installed (apt package iperf3, `make bench` installs it; CI=true: not skipping)")
		}
		t.Skip("iperf3 not installed (apt package iperf3; `make bench` installs it)")
	}
}

// iperfServer runs `iperf3 -s` bound to addr inside n until the test ends.
func iperfServer(t testing.TB, n ns.NetNS, addr string) {
	t.Helper()
	var cmd *exec.Cmd
	var out bytes.Buffer
	mustDo(t, n, func() error {
		cmd = exec.Command("iperf3", "-s", "-B", addr, "-p", "5201")
		cmd.Stdout, cmd.Stderr = &out, &out
		return cmd.Start()
	})
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	// Ready when it listens.
	eventually(t, 5*time.Second, "iperf3 server on "+addr, func() error {
		o, err := inNS(n, "ss", "-Htln", "sport = :5201")
		if err != nil || !strings.Contains(o, addr) {
			return fmt.Errorf("not listening yet (%v): %s %s", err, o, out.String())
		}
		return nil
	})
}

// iperfRun runs one iperf3 TCP client from n to addr for secs seconds
// (the first second omitted: slow start) and returns the receiver's rate
// in Gbit/s.
func iperfRun(t testing.TB, n ns.NetNS, addr string, secs int) float64 {
	t.Helper()
	out, err := inNS(n, "iperf3", "-c", addr, "-p", "5201", "-t", fmt.Sprint(secs), "-O", "1", "-J")
	if err != nil {
		t.Fatalf("iperf3 -c %s: %v\n%s", addr, err, out)
	}
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Error != "" || r.End.SumReceived.BitsPerSecond == 0 {
		t.Fatalf("iperf3 -c %s: %v %s\n%s", addr, err, r.Error, out)
	}
	return r.End.SumReceived.BitsPerSecond / 1e9
}

// medianOf is the median of xs (the lower middle for an even count).
func medianOf(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[(len(s)-1)/2]
}

// createVXLANPool creates an IPv4 pool with vxlanMode Always for the
// given uses.
func createVXLANPool(t testing.TB, c *cluster, name, cidr string, uses ...api.IPPoolAllowedUse) {
	t.Helper()
	k, _ := api.LookupKind("IPPool")
	p := k.NewObject().(*api.IPPool)
	p.Metadata.Name, p.Spec.CIDR, p.Spec.BlockSize = name, cidr, 26
	p.Spec.VXLANMode, p.Spec.AllowedUses = api.VXLANModeAlways, uses
	if _, err := c.cl.CreateResource(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// routeEvents records, from a netlink subscription in a node's namespace,
// when a route for each prefix first appeared over a given device and
// when it was last removed.
type routeEvents struct {
	mu      sync.Mutex
	added   map[netip.Prefix]time.Time
	removed map[netip.Prefix]time.Time
	link    int
	changed chan struct{}
}

// subscribeRoutes watches the node's IPv4 routes over device dev (which
// must exist) until the test ends.
func subscribeRoutes(t testing.TB, nd *clusterNode, dev string) *routeEvents {
	t.Helper()
	h, err := netns.GetFromPath(nd.ns.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	l, err := nl.LinkByName(dev)
	if err != nil {
		t.Fatalf("%s on %s: %v", dev, nd.name, err)
	}
	ev := &routeEvents{added: map[netip.Prefix]time.Time{}, removed: map[netip.Prefix]time.Time{},
		link: l.Attrs().Index, changed: make(chan struct{}, 1)}
	ch, done := make(chan netlink.RouteUpdate, 256), make(chan struct{})
	if err := netlink.RouteSubscribeWithOptions(ch, done, netlink.RouteSubscribeOptions{Namespace: &h,
		ErrorCallback: func(err error) {
			select {
			case <-done: // closing the subscription ends its receive with an error
			default:
				t.Errorf("route subscription on %s: %v", nd.name, err)
			}
		}}); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for u := range ch {
			now := time.Now()
			if u.Dst == nil || u.LinkIndex != ev.link || u.Family != netlink.FAMILY_V4 {
				continue
			}
			p, ok := netip.AddrFromSlice(u.Dst.IP.To4())
			if !ok {
				continue
			}
			ones, _ := u.Dst.Mask.Size()
			pfx := netip.PrefixFrom(p, ones)
			ev.mu.Lock()
			switch u.Type {
			case unix.RTM_NEWROUTE:
				if _, seen := ev.added[pfx]; !seen {
					ev.added[pfx] = now
				}
			case unix.RTM_DELROUTE:
				ev.removed[pfx] = now
			}
			ev.mu.Unlock()
			select {
			case ev.changed <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return ev
}

// forget drops what is known about p (before it is added again).
func (ev *routeEvents) forget(p netip.Prefix) {
	ev.mu.Lock()
	delete(ev.added, p)
	delete(ev.removed, p)
	ev.mu.Unlock()
}

// wait returns the time of p's event (added or removed) once it has
// happened.
func (ev *routeEvents) wait(t testing.TB, p netip.Prefix, added bool) time.Time {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		ev.mu.Lock()
		at, ok := ev.removed[p]
		if added {
			at, ok = ev.added[p]
		}
		ev.mu.Unlock()
		if ok {
			return at
		}
		select {
		case <-ev.changed:
		case <-deadline:
			t.Fatalf("route %s not %s after 30s", p, map[bool]string{true: "added", false: "removed"}[added])
		}
	}
}

// newRoutedPair is two nodes in two subnets, 10.251.1.0/24 and
// 10.251.2.0/24, each on a point-to-point veth to a router namespace that
// knows only those subnets (newTwoSubnetCluster puts a bridge there
// instead). A Linux bridge advertises no offloads for encapsulated packets
// (hw_enc_features), so routing a VXLAN packet out of one makes the router
// cut every 64 KB GSO packet into MTU-sized ones in software; a veth keeps
// them whole as it keeps plain TCP's, so the two paths compare what the
// nodes themselves do. etcd listens on the router's 10.251.1.254.
func newRoutedPair(t testing.TB) *cluster {
	t.Helper()
	needRoot(t)
	rt := newNS(t)
	c := &cluster{t: t, br: rt, bin: cniBinDir(t), subnet: overlayNet + ".1"}
	mustNS(t, rt, "ip", "link", "set", "lo", "up")
	mustNS(t, rt, "sysctl", "-qw", "net.ipv4.ip_forward=1") // it is a router
	for i := 1; i <= 2; i++ {
		nd := &clusterNode{c: c, name: fmt.Sprintf("node%d", i), index: i, ns: newNS(t),
			ip: fmt.Sprintf("%s.%d.%d", overlayNet, i, i), state: t.TempDir()}
		gw := fmt.Sprintf("%s.%d.%s", overlayNet, i, bridgeIP)
		peer := fmt.Sprintf("n%d", i)
		mustNS(t, rt, "ip", "link", "add", peer, "type", "veth", "peer", "name", "eth0", "netns", nsName(nd.ns))
		mustNS(t, rt, "ip", "addr", "add", gw+"/24", "dev", peer)
		mustNS(t, rt, "ip", "link", "set", peer, "up")
		mustNS(t, nd.ns, "ip", "addr", "add", nd.ip+"/24", "dev", "eth0")
		mustNS(t, nd.ns, "ip", "link", "set", "eth0", "up")
		mustNS(t, nd.ns, "ip", "route", "add", "default", "via", gw, "dev", "eth0")
		freshHostForwarding(t, nd.ns)
		nd.cfg = libcni.NewCNIConfigWithCacheDir([]string{c.bin}, t.TempDir(), nil)
		c.nodes = append(c.nodes, nd)
	}
	c.etcd = storetest.StartEtcdIn(t, func(f func() error) error { return rt.Do(func(ns.NetNS) error { return f() }) },
		overlayNet+".1."+bridgeIP)
	c.cl = c.etcd.Client(t)
	return c
}

package dataplane

import (
	"fmt"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/internal/nstest"
	"github.com/calico-aio/calico-aio/store/api"
)

// The qos manager puts a workload's ingress bandwidth on its host veth as
// our tbf (handle ca11:), changes it in place, repairs one changed or
// deleted by someone else, and removes it when the limit or the endpoint
// goes; a tbf that is not ours stays.
func TestQoSManagerTbf(t *testing.T) {
	needKernel(t)
	tools := wrapTools(t)
	n := newKernelNS(t, tools)
	tc := func(args ...string) string { return run(t, n, "tc", args...) }
	m := newQoSManager()
	apply := func(eps ...LocalEndpoint) {
		t.Helper()
		m.SetDesired(eps, true)
		if err := n.Do(func(ns.NetNS) error { return m.Apply() }); err != nil {
			t.Fatalf("apply: %v", err)
		}
	}
	root := func(iface string) string {
		t.Helper()
		for _, l := range strings.Split(tc("qdisc", "show", "dev", iface), "\n") {
			if strings.Contains(l, " root ") {
				return l
			}
		}
		return ""
	}
	ep := func(iface string, q *api.QoSControls) LocalEndpoint {
		return LocalEndpoint{Iface: iface, Shaping: IngressShaping(q)}
	}
	expect := func(iface, want string) {
		t.Helper()
		got := root(iface)
		if want == "" && strings.Contains(got, "tbf") || want != "" && !strings.Contains(got, want) {
			t.Fatalf("%s root qdisc %q, want %q", iface, got, want)
		}
	}

	// 10 Mbit/s with a 200 kbit (25 kB) burst; the default burst.
	apply(ep("calitest1", &api.QoSControls{IngressBandwidth: 10_000_000, IngressBurst: 200_000}),
		ep("calitest2", &api.QoSControls{IngressBandwidth: 1_000_000}), ep("calitest3", nil))
	expect("calitest1", "rate 10Mbit burst 25000b lat 25ms")
	if !strings.HasPrefix(root("calitest1"), "qdisc tbf ca11: root") {
		t.Fatalf("not our handle: %s", root("calitest1"))
	}
	expect("calitest2", "rate 1Mbit")
	expect("calitest3", "")
	// What the kernel reports back is what was asked (also the capped
	// bucket of the default 4 Gibit burst), so a resync changes nothing.
	for _, c := range []struct {
		iface string
		q     *api.QoSControls
	}{{"calitest1", &api.QoSControls{IngressBandwidth: 10_000_000, IngressBurst: 200_000}}, {"calitest2", &api.QoSControls{IngressBandwidth: 1_000_000}}} {
		err := n.Do(func(ns.NetNS) error {
			link, err := m.nl.h.LinkByName(c.iface)
			if err != nil {
				return err
			}
			qs, err := m.nl.h.QdiscList(link)
			if err != nil {
				return err
			}
			for _, q := range qs {
				if tb, ok := q.(*netlink.Tbf); ok && tb.Handle == qosHandle {
					if want := tbfFor(*IngressShaping(c.q), link); !sameTbf(tb, want) {
						return fmt.Errorf("read back %+v, want %+v", tb, want)
					}
					return nil
				}
			}
			return fmt.Errorf("no tbf of ours")
		})
		if err != nil {
			t.Fatalf("%s: %v", c.iface, err)
		}
	}
	// A change applies in place, with a peakrate (minburst: MTU + 14).
	apply(ep("calitest1", &api.QoSControls{IngressBandwidth: 20_000_000, IngressBurst: 400_000, IngressPeakrate: 40_000_000}),
		ep("calitest2", &api.QoSControls{IngressBandwidth: 1_000_000}), ep("calitest3", nil))
	expect("calitest1", "rate 20Mbit burst 50000b peakrate 40Mbit minburst 151") // tc shows it rounded to ticks
	// Drift: someone changes one and deletes the other; a resync repairs both.
	tc("qdisc", "replace", "dev", "calitest1", "root", "handle", "ca11:", "tbf", "rate", "1mbit", "burst", "10kb", "latency", "10ms")
	tc("qdisc", "del", "dev", "calitest2", "root")
	m.resyncAll()
	apply(ep("calitest1", &api.QoSControls{IngressBandwidth: 20_000_000, IngressBurst: 400_000, IngressPeakrate: 40_000_000}),
		ep("calitest2", &api.QoSControls{IngressBandwidth: 1_000_000}), ep("calitest3", nil))
	expect("calitest1", "rate 20Mbit burst 50000b peakrate 40Mbit")
	expect("calitest2", "rate 1Mbit")
	// Removing the limit, and the endpoint, removes our tbf; another's
	// tbf on a workload interface is left alone.
	tc("qdisc", "replace", "dev", "calitest3", "root", "handle", "1:", "tbf", "rate", "1mbit", "burst", "10kb", "latency", "10ms")
	apply(ep("calitest1", nil), ep("calitest3", nil))
	expect("calitest1", "")
	expect("calitest2", "")
	expect("calitest3", "qdisc tbf 1: root")
	// An interface that does not exist yet stays pending, then gets its tbf.
	apply(ep("calitest9", &api.QoSControls{IngressBandwidth: 5_000_000, IngressBurst: 100_000}))
	if !m.dirty {
		t.Fatal("a missing interface's shaping should stay pending")
	}
	run(t, n, tools.real["ip"], "link", "add", "calitest9", "type", "veth", "peer", "name", "pod9")
	apply(ep("calitest9", &api.QoSControls{IngressBandwidth: 5_000_000, IngressBurst: 100_000}))
	expect("calitest9", "rate 5Mbit burst 12500b")
}

// Egress bandwidth: our classifier on the host veth's ingress redirects
// what the workload sends to its ifb device, whose tbf shapes it; the
// packets still arrive. A deleted ifb is recreated (and the classifier
// re-pointed) on resync; removing the limit removes both; a stray ifb of
// ours goes on resync.
func TestQoSManagerEgressIfb(t *testing.T) {
	needKernel(t)
	if !EgressShapingSupported() {
		t.Fatal("this kernel cannot load the egress redirect program")
	}
	tools := wrapTools(t)
	n := newKernelNS(t, tools)
	ip := tools.real["ip"]
	pod := nstest.NewNS(t)
	run(t, n, ip, "addr", "add", "10.9.0.1/24", "dev", "calitest1")
	run(t, n, ip, "link", "set", "pod1", "netns", pod.Path())
	run(t, pod, ip, "addr", "add", "10.9.0.2/24", "dev", "pod1")
	run(t, pod, ip, "link", "set", "pod1", "up")
	ifb := IfbName("calitest1")
	m := newQoSManager()
	apply := func(q *api.QoSControls) {
		t.Helper()
		m.SetDesired([]LocalEndpoint{{Iface: "calitest1", EgressShaping: EgressShaping(q)}}, true)
		if err := n.Do(func(ns.NetNS) error { return m.Apply() }); err != nil {
			t.Fatalf("apply: %v", err)
		}
	}
	sent := func() int {
		t.Helper()
		out := run(t, n, "tc", "-s", "qdisc", "show", "dev", ifb)
		var bytes, pkts int
		if i := strings.Index(out, "Sent "); i < 0 {
			t.Fatalf("no tbf statistics on %s:\n%s", ifb, out)
		} else if _, err := fmt.Sscanf(out[i:], "Sent %d bytes %d pkt", &bytes, &pkts); err != nil {
			t.Fatal(err)
		}
		return pkts
	}
	pingThrough := func(what string) {
		t.Helper()
		before := sent()
		run(t, pod, "ping", "-c", "3", "-i", "0.2", "-W", "1", "10.9.0.1")
		if after := sent(); after < before+3 {
			t.Fatalf("%s: the ifb's tbf passed %d packets for 3 pings", what, after-before)
		}
	}

	q := &api.QoSControls{EgressBandwidth: 1_000_000, EgressBurst: 100_000}
	apply(q)
	if got := run(t, n, "tc", "qdisc", "show", "dev", ifb); !strings.Contains(got, "tbf ca11: root") || !strings.Contains(got, "rate 1Mbit burst 12500b") {
		t.Fatalf("%s qdisc:\n%s", ifb, got)
	}
	if got := run(t, n, "tc", "filter", "show", "dev", "calitest1", "ingress"); !strings.Contains(got, "calico-qos-egress direct-action") {
		t.Fatalf("calitest1 ingress filters:\n%s", got)
	}
	pingThrough("shaped")

	run(t, n, ip, "link", "del", ifb)
	m.resyncAll()
	apply(q)
	pingThrough("after the ifb was deleted and the manager resynced")

	run(t, n, ip, "link", "add", "bwcali000000000", "type", "ifb")
	apply(nil)
	m.resyncAll()
	apply(nil)
	links := run(t, n, ip, "-o", "link", "show", "type", "ifb")
	if strings.Contains(links, ifb) || strings.Contains(links, "bwcali000000000") {
		t.Fatalf("ifb devices left after the limit went:\n%s", links)
	}
	if got := run(t, n, "tc", "filter", "show", "dev", "calitest1", "ingress"); strings.Contains(got, "calico-qos") {
		t.Fatalf("our classifier stayed:\n%s", got)
	}
	if got := run(t, n, "tc", "qdisc", "show", "dev", "calitest1"); strings.Contains(got, "ingress") {
		t.Fatalf("the emptied ingress qdisc stayed:\n%s", got)
	}
	run(t, pod, "ping", "-c", "1", "-W", "1", "10.9.0.1")
}

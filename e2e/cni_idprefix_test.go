package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/cni"
	"github.com/calico-aio/calico-aio/store/api"
)

// Plain-CNI containers whose IDs share their first 11 characters (as
// containerd's "<namespace>-<name>" IDs do) each get their own host veth:
// both work side by side, and each DEL removes only its own veth, also
// with the datastore down (issue #12 item 2).
func TestCNIIDPrefix(t *testing.T) {
	t.Parallel()
	e := newCNIEnv(t, 62)
	e.pool("v4", "10.162.0.0/24")
	createNode(t, e.cl, "node1")
	l := e.conflist("1.0.0", "prefixnet", e.calicoPlugin("node1", ""))
	ctx := context.Background()

	type pod struct {
		rt   *libcni.RuntimeConf
		ns   ns.NetNS
		ip   string
		host string // the host interface its endpoint records
	}
	add := func(id string) *pod {
		t.Helper()
		p := &pod{ns: newNS(t)}
		p.rt = &libcni.RuntimeConf{ContainerID: id, NetNS: p.ns.Path(), IfName: "eth0"}
		res, err := e.add(l, p.rt)
		if err != nil {
			t.Fatalf("ADD %s: %v", id, err)
		}
		p.ip, _ = podAddrs(res)
		r, err := e.cl.GetResource(ctx, wepKindInfo(), "default", "node1-cni-"+strings.ReplaceAll(id, "-", "--")+"-eth0")
		if err != nil {
			t.Fatalf("endpoint of %s: %v", id, err)
		}
		p.host = r.(*api.WorkloadEndpoint).Spec.InterfaceName
		if len(res.Interfaces) == 0 || res.Interfaces[0].Name != p.host {
			t.Errorf("ADD %s answered interfaces %v, endpoint records %s", id, res.Interfaces, p.host)
		}
		return p
	}
	// hostIndex is the index of the host interface name, "" when gone:
	// from the line "N: name@...", whatever else ip prints (it may warn,
	// e.g. "Error: Peer netns reference is invalid.", while other tests'
	// namespaces come and go, and still succeed).
	hostIndex := func(name string) string {
		out, err := inNS(e.host.ns, "ip", "-o", "link", "show", "dev", name)
		if err != nil {
			return ""
		}
		for _, line := range strings.Split(out, "\n") {
			idx, rest, ok := strings.Cut(line, ": ")
			if _, nerr := strconv.Atoi(idx); ok && nerr == nil && (strings.HasPrefix(rest, name+"@") || strings.HasPrefix(rest, name+":")) {
				return idx
			}
		}
		t.Errorf("ip link show dev %s: no line for it in %q", name, out)
		return ""
	}
	// wiredTo checks that the pod's eth0 is the peer of its recorded host
	// interface ("N: eth0@ifPEER: ...").
	wiredTo := func(p *pod) {
		t.Helper()
		out := mustNS(t, p.ns, "ip", "-o", "link", "show", "dev", "eth0")
		_, rest, _ := strings.Cut(out, "@if")
		peer, _, _ := strings.Cut(rest, ":")
		if idx := hostIndex(p.host); idx == "" || idx != peer {
			t.Errorf("%s: eth0's peer is host interface %q, its endpoint records %s (index %q)", p.rt.ContainerID, peer, p.host, idx)
		}
	}

	web1, web2 := add("default-web1"), add("default-web2")
	if web1.host != "calidefault-web" || web2.host == web1.host || !strings.HasPrefix(web2.host, "cali") || len(web2.host) != 15 {
		t.Fatalf("host interfaces %q and %q: want calidefault-web and another", web1.host, web2.host)
	}
	wiredTo(web1)
	wiredTo(web2)
	eventually(t, 5*time.Second, "web1 -> web2", reachable(web1.ns, web2.ip))
	eventually(t, 5*time.Second, "web2 -> web1", reachable(web2.ns, web1.ip))
	if err := ping(web1.ns, "10.162.0.250"); err == nil {
		t.Fatal("ping to an unassigned address succeeded: the ping check proves nothing")
	}
	for _, p := range []*pod{web1, web2} {
		if err := e.inHost(func() error { return e.cfg.CheckNetworkList(ctx, l, p.rt) }); err != nil {
			t.Errorf("CHECK %s: %v", p.rt.ContainerID, err)
		}
	}

	// DEL of web1 with the datastore down: the plugin finds web1's veth
	// as the peer of its eth0 and removes it alone.
	idx2 := hostIndex(web2.host)
	e.etcd.Stop()
	err := e.del(l, web1.rt)
	e.etcd.Restart(t)
	if err != nil {
		t.Fatalf("DEL web1 with the datastore down: %v", err)
	}
	if idx := hostIndex(web1.host); idx != "" {
		t.Errorf("web1's %s is still there (index %s)", web1.host, idx)
	}
	if idx := hostIndex(web2.host); idx != idx2 {
		t.Fatalf("web2's %s: index %q, was %q", web2.host, idx, idx2)
	}
	eventually(t, 5*time.Second, "web2 -> host", reachable(web2.ns, e.host.hostIP))
	if err := e.inHost(func() error { return e.cfg.CheckNetworkList(ctx, l, web2.rt) }); err != nil {
		t.Errorf("CHECK web2 after web1's DEL: %v", err)
	}

	// A third container of the same prefix (its ADD replays web1's
	// journaled delete) takes a free name and works with web2.
	web3 := add("default-web3")
	if web3.host == web2.host {
		t.Fatalf("web3 took web2's %s", web3.host)
	}
	wiredTo(web3)
	if idx := hostIndex(web2.host); idx != idx2 {
		t.Fatalf("web3's ADD touched web2's %s", web2.host)
	}
	eventually(t, 5*time.Second, "web3 -> web2", reachable(web3.ns, web2.ip))
	eventually(t, 5*time.Second, "web2 -> web3", reachable(web2.ns, web3.ip))

	// DEL of web2 leaves web3 alone; then everything goes.
	idx3 := hostIndex(web3.host)
	for i := range 2 {
		if err := e.del(l, web2.rt); err != nil {
			t.Fatalf("DEL #%d web2: %v", i+1, err)
		}
	}
	if hostIndex(web2.host) != "" || hostIndex(web3.host) != idx3 {
		t.Fatalf("after web2's DEL: %s index %q, %s index %q (was %s)", web2.host, hostIndex(web2.host), web3.host, hostIndex(web3.host), idx3)
	}
	eventually(t, 5*time.Second, "web3 -> host", reachable(web3.ns, e.host.hostIP))
	for _, p := range []*pod{web3, web1} {
		if err := e.del(l, p.rt); err != nil {
			t.Errorf("DEL %s: %v", p.rt.ContainerID, err)
		}
	}
	e.assertClean()
	e.ipamCheckClean()
}

// "calicoctl container add" follows the same rule: an interface already
// under the workload's first-choice name that belongs to another live
// workload is left alone, the workload gets another name that its
// endpoint records, and "container remove" removes only that one.
func TestContainerIDPrefix(t *testing.T) {
	e := newCNIEnv(t, 63)
	e.pool("v4", "10.163.0.0/24")
	createNode(t, e.cl, "node1")
	ctx := context.Background()
	wl, other := newNS(t), newNS(t)
	first := cni.Workload{Node: "node1", Orchestrator: cni.OrchestratorNamespace, ID: nsName(wl), IfName: "eth1"}.HostVeth()
	mustNS(t, e.host.ns, "ip", "link", "add", first, "type", "veth", "peer", "name", "eth0", "netns", nsName(other))
	foreignIdx := strings.Fields(mustNS(t, e.host.ns, "ip", "-o", "link", "show", "dev", first))[0]

	ctl := func(args ...string) string {
		t.Helper()
		out, err := e.classicContainer(append(args, "--hostname", "node1")...)
		if err != nil {
			t.Fatalf("calicoctl container %v: %v", args, err)
		}
		return out
	}
	out := ctl("add", wl.Path(), "ipv4")
	m := classicAddedIP.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("container add: no address in %q", out)
	}
	r, err := e.cl.GetResource(ctx, wepKindInfo(), "default", "node1-namespace-"+strings.ReplaceAll(nsName(wl), "-", "--")+"-eth1")
	if err != nil {
		t.Fatal(err)
	}
	host := r.(*api.WorkloadEndpoint).Spec.InterfaceName
	if host == first || !strings.HasPrefix(host, "cali") || !strings.Contains(out, "host interface "+host) {
		t.Fatalf("container add took %q (first choice %s, held by another workload): %s", host, first, out)
	}
	if idx := strings.Fields(mustNS(t, e.host.ns, "ip", "-o", "link", "show", "dev", first))[0]; idx != foreignIdx {
		t.Fatalf("the other workload's %s was replaced (index %s, was %s)", first, idx, foreignIdx)
	}
	if !strings.Contains(mustNS(t, e.host.ns, "ip", "route", "show", m[1]), "dev "+host) {
		t.Errorf("no host route for %s via %s", m[1], host)
	}
	eventually(t, 5*time.Second, "workload -> host", reachable(wl, e.host.hostIP))

	ctl("remove", wl.Path())
	if _, err := inNS(e.host.ns, "ip", "link", "show", "dev", host); err == nil {
		t.Errorf("container remove left %s", host)
	}
	if idx := strings.Fields(mustNS(t, e.host.ns, "ip", "-o", "link", "show", "dev", first))[0]; idx != foreignIdx {
		t.Errorf("container remove touched the other workload's %s", first)
	}
	mustNS(t, e.host.ns, "ip", "link", "del", first)
	e.assertClean()
	e.ipamCheckClean()
}

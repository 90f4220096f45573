package dataplane

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/internal/nstest"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

const thisNode = "node1"

// kernelTools are the commands the dataplane runs; the test wraps them to
// count calls, and renders state with the real ones.
var kernelTools = []string{"iptables-save", "iptables-restore", "ip6tables-save", "ip6tables-restore", "ipset"}

// needKernel skips without root or the tools the dataplane runs, except
// in CI where that fails.
func needKernel(t testing.TB) {
	t.Helper()
	nstest.NeedKernel(t, append([]string{"ip", "iptables", "ip6tables"}, kernelTools...)...)
}

// toolLog wraps the dataplane's commands in scripts, first on PATH, that
// log each call; real holds the unwrapped paths.
type toolLog struct {
	path string
	real map[string]string
}

func wrapTools(t *testing.T) *toolLog {
	t.Helper()
	dir := t.TempDir()
	l := &toolLog{path: filepath.Join(dir, "calls.log"), real: map[string]string{}}
	for _, tool := range append([]string{"ip"}, kernelTools...) {
		real, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		l.real[tool] = real
		if tool == "ip" {
			continue
		}
		script := fmt.Sprintf("#!/bin/sh\necho \"%s $*\" >> %s\nexec %s \"$@\"\n", tool, l.path, real)
		if err := os.WriteFile(filepath.Join(dir, tool), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return l
}

// calls returns the logged calls and clears the log.
func (l *toolLog) calls(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(l.path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	_ = os.Remove(l.path)
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(b)), " ", "_"))
}

// newKernelNS makes a namespace standing for a node: lo up, workload veths
// calitest1..4 (peers podN in the same namespace), and an uplink with
// next hops for BGP routes. It is removed when the test ends.
func newKernelNS(t *testing.T, l *toolLog) ns.NetNS {
	t.Helper()
	n := nstest.NewNS(t)
	sh := func(args ...string) { run(t, n, l.real["ip"], args...) }
	sh("link", "set", "lo", "up")
	for i := 1; i <= 4; i++ {
		host, peer := fmt.Sprintf("calitest%d", i), fmt.Sprintf("pod%d", i)
		sh("link", "add", host, "type", "veth", "peer", "name", peer)
		sh("link", "set", host, "up")
		sh("link", "set", peer, "up")
	}
	sh("link", "add", "uplink", "type", "veth", "peer", "name", "upstream")
	sh("link", "set", "upstream", "up")
	sh("addr", "add", "172.30.0.1/24", "dev", "uplink")
	sh("addr", "add", "fd00:30::1/64", "dev", "uplink", "nodad")
	sh("link", "set", "uplink", "up")
	return n
}

// run runs a command inside namespace n and returns its output.
func run(t testing.TB, n ns.NetNS, name string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	err := n.Do(func(ns.NetNS) error {
		cmd := exec.Command(name, args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		return cmd.Run()
	})
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// kernelText renders what the dataplane owns in namespace n: our iptables
// chains and hooks (counters stripped, rule-hash comments kept), our IP
// sets, our routes, permanent neighbours on cali* and the sysctls of the
// given interfaces.
func kernelText(t testing.TB, n ns.NetNS, l *toolLog, ifaces []string) string {
	t.Helper()
	var b strings.Builder
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		b.WriteString(ourChains(save, run(t, n, l.real[save])))
	}
	var sets []string
	for _, line := range strings.Split(run(t, n, l.real["ipset"], "save"), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !(strings.HasPrefix(f[1], "cali4") || strings.HasPrefix(f[1], "cali6")) {
			continue
		}
		if f[0] == "create" { // drop hashsize, bucketsize, initval: sizing and randomness
			keep := f[:3]
			for i := 3; i+1 < len(f); i += 2 {
				if f[i] == "family" || f[i] == "maxelem" {
					keep = append(keep, f[i], f[i+1])
				}
			}
			f = keep
		}
		sets = append(sets, strings.Join(f, " "))
	}
	sort.Strings(sets)
	b.WriteString("# ipsets\n" + strings.Join(sets, "\n") + "\n")
	for _, r := range [][]string{{"-4", "80"}, {"-4", "81"}, {"-6", "80"}, {"-6", "81"}} {
		fmt.Fprintf(&b, "# ip %s route proto %s\n%s", r[0], r[1], run(t, n, l.real["ip"], r[0], "route", "show", "proto", r[1]))
	}
	var neigh []string
	for _, line := range strings.Split(run(t, n, l.real["ip"], "neigh", "show", "nud", "permanent"), "\n") {
		if strings.Contains(line, " dev cali") {
			neigh = append(neigh, line)
		}
	}
	sort.Strings(neigh)
	b.WriteString("# permanent neighbours\n" + strings.Join(neigh, "\n") + "\n")
	sort.Strings(ifaces)
	for _, i := range ifaces {
		var vals []string
		err := n.Do(func(ns.NetNS) error {
			for _, p := range []string{"ipv4/conf/" + i + "/proxy_arp", "ipv4/neigh/" + i + "/proxy_delay",
				"ipv4/conf/" + i + "/forwarding", "ipv4/conf/" + i + "/route_localnet"} {
				v, err := os.ReadFile("/proc/sys/net/" + p)
				if err != nil {
					return err
				}
				vals = append(vals, p+"="+strings.TrimSpace(string(v)))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(strings.Join(vals, " ") + "\n")
	}
	return b.String()
}

// ourChains keeps, per table, our chains' declarations and rules and the
// hook rules in built-in chains, grouped by chain in name order (chains
// are listed in creation order by some iptables versions) with each
// chain's rules in kernel order.
func ourChains(cmd, save string) string {
	var b strings.Builder
	var table string
	byChain := map[string][]string{}
	flush := func() {
		if len(byChain) == 0 {
			return
		}
		names := make([]string, 0, len(byChain))
		for c := range byChain {
			names = append(names, c)
		}
		sort.Strings(names)
		fmt.Fprintf(&b, "# %s %s\n", cmd, table)
		for _, c := range names {
			b.WriteString(strings.Join(byChain[c], "\n") + "\n")
		}
		byChain = map[string][]string{}
	}
	for _, line := range strings.Split(save, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			flush()
			table = line[1:]
		case strings.HasPrefix(line, ":cali-"):
			name := strings.Fields(line)[0][1:]
			byChain[name] = append([]string{":" + name}, byChain[name]...)
		case strings.HasPrefix(line, "-A ") && strings.Contains(line, "cali-"):
			chain := strings.Fields(line)[1]
			byChain[chain] = append(byChain[chain], line)
		}
	}
	flush()
	return b.String()
}

// datastore is stored values by key, as the syncer sees them.
type datastore map[string][]byte

func (ds datastore) put(t testing.TB, r api.Resource) {
	t.Helper()
	r.Default()
	if err := r.Validate(); err != nil {
		t.Fatalf("test resource %s %s is invalid: %v", r.GetTypeMeta().Kind, r.GetObjectMeta().Name, err)
	}
	k, _ := api.LookupKind(r.GetTypeMeta().Kind)
	v, err := store.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	ds[etcdv3.ResourceKey(k, r.GetObjectMeta().Namespace, r.GetObjectMeta().Name)] = v
}

func (ds datastore) block(t testing.TB, cidr string) {
	t.Helper()
	p := netip.MustParsePrefix(cidr)
	a := "host:" + thisNode
	v, err := json.Marshal(ipam.Block{CIDR: p.String(), Affinity: &a, Allocations: []*int{}, Unallocated: []int{},
		Attributes: []ipam.AllocationAttributes{}})
	if err != nil {
		t.Fatal(err)
	}
	ds[etcdv3.BlockKey(p)] = v
}

// updates is what the syncer sends to move from one datastore content to
// another: changed and new keys, then deletes (decoded as
// felix/syncer/syncer.go decodeEvent does).
func updates(t testing.TB, from, to datastore) []calc.Update {
	t.Helper()
	decode := func(key string, value []byte) calc.Update {
		u := calc.Update{Key: key, Deleted: value == nil}
		if strings.HasPrefix(key, etcdv3.BlockPrefix) {
			u.Kind = calc.KindBlock
			if value != nil {
				b, err := ipam.ParseBlock(value)
				if err != nil {
					t.Fatal(err)
				}
				u.Block = b
			}
			return u
		}
		u.Kind, _, _ = strings.Cut(strings.TrimPrefix(key, etcdv3.ResourcePrefix), "/")
		if value != nil {
			r, err := store.DecodeObject(store.Object{Value: value, Revision: "1"})
			if err != nil {
				t.Fatal(err)
			}
			u.Resource = r
		}
		return u
	}
	var out []calc.Update
	for _, k := range sortedKeys(to) {
		if old, ok := from[k]; !ok || !bytes.Equal(old, to[k]) {
			out = append(out, decode(k, to[k]))
		}
	}
	for _, k := range sortedKeys(from) {
		if _, ok := to[k]; !ok {
			out = append(out, decode(k, nil))
		}
	}
	return out
}

func sortedKeys(ds datastore) []string {
	keys := make([]string, 0, len(ds))
	for k := range ds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// toDataplane is the agent's conversion (felix/agent.go apply) of the
// calculation's result, with BGP routes as extra routes.
func toDataplane(d calc.Desired, bgp map[netip.Prefix]RouteTarget) Desired {
	des := Desired{InSync: true, IPSets: map[string]IPSet{}, Routes: map[netip.Prefix]RouteTarget{},
		Tables: map[int]map[string][]iptables.Chain{}, Forwarding: Forwarding{Mode: d.IPForwarding, IPv6: d.IPv6}}
	for ver, t := range d.Tables {
		des.Tables[ver] = map[string][]iptables.Chain{"filter": t.Filter, "nat": t.NAT, "mangle": t.Mangle, "raw": t.Raw}
	}
	for name, s := range d.IPSets {
		des.IPSets[name] = IPSet{Type: s.Type, Family: s.Family, Members: s.Members}
	}
	for _, ep := range d.Endpoints {
		des.Endpoints = append(des.Endpoints, LocalEndpoint{Iface: ep.Iface, Addrs: ep.Addrs, MAC: ep.MAC})
		for _, addr := range ep.Addrs {
			des.Routes[netip.PrefixFrom(addr, addr.BitLen())] = RouteTarget{Iface: ep.Iface}
		}
	}
	for _, b := range d.Blackholes {
		des.Routes[b] = RouteTarget{Blackhole: true}
	}
	for p, t := range bgp {
		if _, local := des.Routes[p]; !local {
			des.Routes[p] = t
		}
	}
	return des
}

// node is one agent's pipeline into a namespace: calculation state and
// dataplane, fed datastore contents one after another.
type node struct {
	t     *testing.T
	ns    ns.NetNS
	state *calc.State
	dp    *Dataplane
	ds    datastore // what the state has seen
	des   Desired   // the last desired state applied
}

func newNode(t *testing.T, n ns.NetNS) *node {
	s := calc.NewState(thisNode)
	s.Apply(calc.Update{InSync: true})
	return &node{t: t, ns: n, state: s, dp: New(Config{IPv6: true}), ds: datastore{}}
}

// to sends the updates that lead to st and applies the result in the
// namespace.
func (nd *node) to(st dpState) {
	nd.t.Helper()
	for _, u := range updates(nd.t, nd.ds, st.ds) {
		nd.state.Apply(u)
	}
	nd.ds = st.ds
	nd.des = toDataplane(nd.state.Desired(true), st.bgp)
	nd.apply()
}

func (nd *node) apply() {
	nd.t.Helper()
	if err := nd.ns.Do(func(ns.NetNS) error { return nd.dp.Apply(nd.des) }); err != nil {
		nd.t.Fatalf("apply: %v", err)
	}
}

func (nd *node) ifaces() []string {
	var out []string
	for _, ep := range nd.des.Endpoints {
		out = append(out, ep.Iface)
	}
	return out
}

// routeApplier returns a function that makes routes rm's whole desired set
// (in sync with the datastore) and applies it inside n, failing t on error.
func routeApplier(t *testing.T, n ns.NetNS, rm *routeManager) func(routes map[netip.Prefix]RouteTarget) {
	return func(routes map[netip.Prefix]RouteTarget) {
		t.Helper()
		if err := n.Do(func(ns.NetNS) error { rm.SetDesired(routes, true); return rm.Apply() }); err != nil {
			t.Fatal(err)
		}
	}
}

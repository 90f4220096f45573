package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// BenchmarkOverlayPodPath splits the pod path's cost (issue #14): in
// interleaved rounds (the order rotates every round) over the routed pair
// with VXLAN, iperf3 from node1 to node2 host to host, pod to pod as the
// agent programs it, and pod to pod with one factor taken away at a time
// by test-only knobs that the benchmark sets on both nodes for that run
// and removes after it (the agents' iptables refresh is off, so they do
// not repair it meanwhile); and node1 to node2's VXLAN tunnel address
// (host/vxlan: the tunnel and its rules without the pods' veths and
// forwarding):
//
//	pod/no-forward-rules an ACCEPT ahead of the hook to cali-FORWARD: none
//	                     of our forward chains is walked
//	pod/no-vxlan-rules   VXLAN (UDP 4789) accepted ahead of the hooks to
//	                     cali-INPUT and cali-OUTPUT: the agent's VXLAN
//	                     rules (IP set and address type checks) skipped
//	pod/no-rules         both
//	pod/no-rules-no-ct   both, and NOTRACK in raw PREROUTING and OUTPUT
//	host/vxlan/no-rules-no-ct
//	                     node1 to node2's tunnel address without the VXLAN
//	                     rules and conntrack: what the encapsulation itself
//	                     costs against host to host
//	pod/nft-native       as pod/no-rules, with the same per-packet work
//	                     written as a native nftables table instead
//	                     (nativeRules): what rules without xtables
//	                     extensions would cost
//
// Reported: each variant's median and its ratio to host-to-host. With
// OVERLAY_BENCH_PERF=<dir> every run is also profiled system-wide (perf
// record -a -g) and, since the two vCPUs are shared with other work, the
// cost is reported per byte rather than per second: the samples of the
// iperf3 processes and ksoftirqd (where all of the path's kernel work
// runs) per sample copying payload to or from user space (a per-byte cost
// equal on every path), and how many of them are in netfilter hooks.
func BenchmarkOverlayPodPath(b *testing.B) {
	needIperf3(b)
	rounds, secs := benchRounds(b, 5), 4
	b.Setenv("FELIX_IPTABLESREFRESHINTERVAL", "0")
	c := vxlanPair(b, false, func(c *cluster) { createVXLANPool(b, c, "vx", "10.131.0.0/16") })
	n1, n2 := c.nodes[0], c.nodes[1]
	p1, p2 := n1.pod("net", "bench-p1"), n2.pod("net", "bench-p2")
	eventually(b, 20*time.Second, "pod1 -> pod2 over VXLAN", reachable(p1.ns, p2.ip))
	iperfServer(b, n2.ns, n2.ip)
	iperfServer(b, p2.ns, p2.ip)
	tun2 := c.tunnelAddr(n2.name)
	iperfServer(b, n2.ns, tun2)
	nodes := []ns.NetNS{n1.ns, n2.ns}
	b.Logf("node1 host veth features unlike eth0's: %s", featureDiff(b, n1.ns, "eth0", n1.ns, caliIface(b, n1.ns)))
	for _, nd := range c.nodes {
		var rp []string
		for _, i := range []string{"all", "default", "eth0", "vxlan.calico", caliIface(b, nd.ns)} {
			rp = append(rp, i+"="+strings.TrimSpace(mustNS(b, nd.ns, "cat", "/proc/sys/net/ipv4/conf/"+i+"/rp_filter")))
		}
		b.Logf("%s rp_filter: %s", nd.name, strings.Join(rp, " "))
	}
	b.Logf("pod1 eth0 features unlike node1 eth0's: %s", featureDiff(b, n1.ns, "eth0", p1.ns, "eth0"))

	type variant struct {
		name     string
		from     ns.NetNS
		to       string
		on, off  func()
		rates    []float64
		perRound []float64
		prof     pathProfile
	}
	both := func(args ...string) func() {
		return func() {
			for _, n := range nodes {
				mustNS(b, n, "iptables", append([]string{"-w"}, args...)...)
			}
		}
	}
	// knob is a test-only change on both nodes: rules inserted first
	// (iptables arguments after "-I"), deleted again after the run.
	knob := func(rules ...[]string) (on, off func()) {
		on = func() {
			for _, r := range rules {
				both(append([]string{"-I"}, r...)...)()
			}
		}
		off = func() {
			for _, r := range rules {
				both(append([]string{"-D"}, slices.Delete(slices.Clone(r), 1, 2)...)...)() // no position
			}
		}
		return on, off
	}
	fwd := []string{"FORWARD", "1", "-j", "ACCEPT"}
	vxIn := []string{"INPUT", "1", "-p", "udp", "--dport", "4789", "-j", "ACCEPT"}
	vxOut := []string{"OUTPUT", "1", "-p", "udp", "--dport", "4789", "-j", "ACCEPT"}
	notrackPre := []string{"PREROUTING", "1", "-t", "raw", "-j", "NOTRACK"}
	notrackOut := []string{"OUTPUT", "1", "-t", "raw", "-j", "NOTRACK"}
	vs := []*variant{
		{name: "host", from: n1.ns, to: n2.ip},
		{name: "host/vxlan", from: n1.ns, to: tun2},
		{name: "pod", from: p1.ns, to: p2.ip},
	}
	for _, k := range []struct {
		name  string
		rules [][]string
	}{
		{"pod/no-forward-rules", [][]string{fwd}},
		{"pod/no-vxlan-rules", [][]string{vxIn, vxOut}},
		{"pod/no-rules", [][]string{fwd, vxIn, vxOut}},
		{"pod/no-rules-no-ct", [][]string{fwd, vxIn, vxOut, notrackPre, notrackOut}},
		{"host/vxlan/no-rules-no-ct", [][]string{vxIn, vxOut, notrackPre, notrackOut}},
	} {
		on, off := knob(k.rules...)
		from, to := p1.ns, p2.ip
		if strings.HasPrefix(k.name, "host/") {
			from, to = n1.ns, tun2
		}
		vs = append(vs, &variant{name: k.name, from: from, to: to, on: on, off: off})
	}
	// pod/nft-native: our iptables chains skipped as in pod/no-rules, and
	// in their place the same per-packet work for this traffic written as
	// a native nftables table (no xtables extension anywhere): what a
	// dataplane without nft_compat would cost.
	nftOn, nftOff := knob(fwd, vxIn, vxOut)
	vs = append(vs, &variant{name: "pod/nft-native", from: p1.ns, to: p2.ip,
		on: func() {
			nftOn()
			for i, nd := range c.nodes {
				pd := []pod{p1, p2}[i]
				f := filepath.Join(b.TempDir(), "rules.nft")
				if err := os.WriteFile(f, []byte(nativeRules(caliIface(b, nd.ns), pd.ip, n1.ip, n2.ip)), 0o600); err != nil {
					b.Fatal(err)
				}
				mustNS(b, nd.ns, "nft", "-f", f)
			}
		},
		off: func() {
			for _, nd := range c.nodes {
				mustNS(b, nd.ns, "nft", "delete", "table", "inet", "aiobench")
			}
			nftOff()
		}})
	for i := 0; i < rounds; i++ {
		var line []string
		for j := range vs {
			v := vs[(i+j)%len(vs)]
			if v.on != nil {
				v.on()
			}
			stop := perfRecord(b, fmt.Sprintf("%s-%d", strings.ReplaceAll(v.name, "/", "_"), i+1))
			r := iperfRun(b, v.from, v.to, secs)
			v.prof.add(stop())
			if v.off != nil {
				v.off()
			}
			v.rates = append(v.rates, r)
			line = append(line, fmt.Sprintf("%s %.2f", v.name, r))
		}
		h := vs[0].rates[i]
		for _, v := range vs {
			v.perRound = append(v.perRound, v.rates[i]/h)
		}
		b.Logf("round %d (Gbit/s): %s", i+1, strings.Join(line, ", "))
	}
	hm := medianOf(vs[0].rates)
	for _, v := range vs {
		m := medianOf(v.rates)
		b.Logf("%-26s median %.2f Gbit/s, %.2fx host-to-host (median of per-round ratios %.2fx)", v.name, m, m/hm, medianOf(v.perRound))
		b.ReportMetric(m/hm, v.name+"-ratio")
		if v.prof.copy > 0 {
			b.Logf("%-26s profile: %.2f samples per copy sample, of which netfilter %.2f (FORWARD hook %.2f); %d samples",
				v.name, v.prof.per(v.prof.total), v.prof.per(v.prof.nf), v.prof.per(v.prof.fwd), v.prof.total)
			b.ReportMetric(v.prof.per(v.prof.total), v.name+"-cost/copy")
		}
	}
}

// perfRecord, with OVERLAY_BENCH_PERF set to a directory, records a
// system-wide profile (perf record -a -g) into <dir>/<name>.data until
// the returned function is called, which then summarises it.
func perfRecord(t testing.TB, name string) func() pathProfile {
	dir := os.Getenv("OVERLAY_BENCH_PERF")
	if dir == "" {
		return func() pathProfile { return pathProfile{} }
	}
	file := filepath.Join(dir, name+".data")
	cmd := exec.Command("perf", "record", "-a", "-g", "-q", "-o", file)
	if err := cmd.Start(); err != nil {
		t.Fatalf("perf record: %v", err)
	}
	return func() pathProfile {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		out, err := exec.Command("perf", "script", "-i", file, "-F", "comm,ip,sym").Output()
		if err != nil {
			t.Fatalf("perf script %s: %v", file, err)
		}
		return summarise(string(out))
	}
}

// pathProfile counts profile samples of the path's processes (iperf3,
// ksoftirqd): all, copying payload (_copy_to_iter, _copy_from_iter), in a
// netfilter hook (nf_hook_slow), and in the FORWARD hook (nf_hook_slow
// called from ip_forward).
type pathProfile struct{ total, copy, nf, fwd int }

func (p pathProfile) per(n int) float64 { return float64(n) / float64(max(p.copy, 1)) }

func (p *pathProfile) add(q pathProfile) {
	p.total, p.copy, p.nf, p.fwd = p.total+q.total, p.copy+q.copy, p.nf+q.nf, p.fwd+q.fwd
}

// summarise reads `perf script -F comm,ip,sym` output: a line with the
// command, then the call chain leaf first, one "addr symbol" a line.
func summarise(out string) pathProfile {
	var p pathProfile
	for _, s := range strings.Split(out, "\n\n") {
		lines := strings.Split(strings.TrimSpace(s), "\n")
		if f := strings.Fields(lines[0]); len(f) == 0 || (f[0] != "iperf3" && !strings.HasPrefix(f[0], "ksoftirqd")) {
			continue
		}
		p.total++
		var syms []string
		for _, l := range lines[1:] {
			if f := strings.Fields(l); len(f) >= 2 {
				syms = append(syms, f[1])
			}
		}
		for i, sym := range syms {
			if sym == "_copy_to_iter" || sym == "_copy_from_iter" {
				p.copy++
				break
			}
			if sym == "nf_hook_slow" {
				p.nf++
				if i+1 < len(syms) && syms[i+1] == "ip_forward" {
					p.fwd++
				}
				break
			}
		}
	}
	return p
}

// caliIface is the one cali* interface in n.
func caliIface(t testing.TB, n ns.NetNS) string {
	t.Helper()
	out := mustNS(t, n, "ip", "-o", "link", "show")
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) > 1 && strings.HasPrefix(f[1], "cali") {
			return strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
		}
	}
	t.Fatalf("no cali* interface in %s:\n%s", nsName(n), out)
	return ""
}

// featureDiff lists the `ethtool -k` features of b's interface whose
// state differs from a's ("name: a-state -> b-state").
func featureDiff(t testing.TB, na ns.NetNS, a string, nb ns.NetNS, bi string) string {
	t.Helper()
	parse := func(out string) map[string]string {
		m := map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(l), ": ")
			if ok {
				m[k] = strings.Fields(v)[0]
			}
		}
		return m
	}
	fa, fb := parse(mustNS(t, na, "ethtool", "-k", a)), parse(mustNS(t, nb, "ethtool", "-k", bi))
	var d []string
	for k, v := range fb {
		if fa[k] != v {
			d = append(d, fmt.Sprintf("%s: %s -> %s", k, fa[k], v))
		}
	}
	sort.Strings(d)
	if len(d) == 0 {
		return "none"
	}
	return strings.Join(d, "; ")
}

// nativeRules is a native nftables rendering of the rules an established
// pod flow and its VXLAN packets meet on a node (the forward chains with
// the mark clear, dispatch, anti-spoofing and conntrack accept; the VXLAN
// rules of INPUT and OUTPUT with their IP set and address type checks),
// for BenchmarkOverlayPodPath's pod/nft-native variant.
func nativeRules(iface, podIP string, nodes ...string) string {
	return fmt.Sprintf(`table inet aiobench {
	set vxnodes { type ipv4_addr; elements = { %[3]s } }
	chain forward {
		type filter hook forward priority filter; policy accept;
		meta mark & 0x70000 != 0 meta mark set meta mark & 0xfff8ffff comment "clear our marks"
		iifname "cali*" jump from_wl comment "from workloads"
		oifname "cali*" jump to_wl comment "to workloads"
		meta mark & 0x10000 == 0x10000 accept comment "policy accepted"
	}
	chain from_wl {
		iifname "%[1]s" goto fw comment "dispatch"
		drop comment "unknown interface"
	}
	chain fw {
		ip saddr != %[2]s drop comment "anti-spoofing"
		ct state established,related accept comment "established"
		ct state invalid drop comment "invalid"
		meta mark set meta mark | 0x10000 comment "profile accepts"
	}
	chain to_wl {
		oifname "%[1]s" goto tw comment "dispatch"
		drop comment "unknown interface"
	}
	chain tw {
		ct state established,related accept comment "established"
		ct state invalid drop comment "invalid"
		meta mark set meta mark | 0x10000 comment "profile accepts"
	}
	chain input {
		type filter hook input priority filter; policy accept;
		udp dport 4789 ip saddr @vxnodes fib daddr type local accept comment "VXLAN from known nodes"
		udp dport 4789 fib daddr type local drop comment "VXLAN from unknown hosts"
	}
	chain output {
		type filter hook output priority filter; policy accept;
		udp dport 4789 ip daddr @vxnodes fib saddr type local accept comment "VXLAN to known nodes"
	}
}
`, iface, podIP, strings.Join(nodes, ", "))
}

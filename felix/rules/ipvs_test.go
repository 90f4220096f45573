package rules

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/internal/nstest"
	"github.com/calico-aio/calico-aio/store/api"
)

// fnv1 is FNV-1 32 (not 1a), written out: Calico hashes interface names
// with hash/fnv.New32.
func fnv1(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h *= 16777619
		h ^= uint32(s[i])
	}
	return h
}

// TestEndpointMarkField: the endpoint field is the mask's bits above its
// lowest five (Calico's accept, pass, drop, scratch0, scratch1); its
// lowest bit is the non-Calico value.
func TestEndpointMarkField(t *testing.T) {
	for _, c := range []struct{ mask, field, nonCali uint32 }{
		{0, 0xffe00000, 0x200000}, // the default 0xffff0000
		{0xffff0000, 0xffe00000, 0x200000},
		{0xff000000, 0xe0000000, 0x20000000},
		{0x0000ffff, 0x0000ffe0, 0x20},
		{0x1f, 0, 0}, // five bits: none left (Calico's Felix will not start in IPVS mode)
		{0x7, 0, 0},  // the agent's three bits only
		{0x3f, 0x20, 0x20},
		{0x8000_00ff, 0x800000e0, 0x20},
	} {
		f := EndpointMarkField(c.mask)
		if f != c.field || NonCaliEndpointMark(f) != c.nonCali {
			t.Errorf("mask %#x: field %#x non-Calico %#x, want %#x %#x", c.mask, f, NonCaliEndpointMark(f), c.field, c.nonCali)
		}
	}
}

// TestEndpointMarksFNV: each interface's value is the FNV-1 hash of its
// name modulo the field's 2^n values, spread over the field's bits; a
// collision takes the next free value (workloads first, then host
// endpoints, by name); 0 and the non-Calico value are never given; with
// no value left an interface gets none.
func TestEndpointMarksFNV(t *testing.T) {
	const field = 0xffe00000 // contiguous: value = position << 21
	names := []string{"cali1234567890a", "calib00b00b00b0", "tap0", "eth0"}
	got := EndpointMarks(field, names[:3], names[3:])
	for _, n := range names {
		want := (fnv1(n) % 2048) << 21
		if got[n] != want {
			t.Errorf("%s: %#x, want %#x (FNV-1 %d mod 2048 at bit 21)", n, got[n], want, fnv1(n)%2048)
		}
	}

	// A field of two bits (mask 0x7f: field 0x60) holds 4 values: 0 and 1
	// (non-Calico) are reserved, so two interfaces fit and a third gets
	// none. Find names whose hashes collide.
	const small = 0x60
	var same []string // hash mod 4 == 2
	var one string    // hash mod 4 == 1: the reserved value, so it moves on
	for i := 0; len(same) < 3 || one == ""; i++ {
		n := fmt.Sprintf("cali%d", i)
		switch fnv1(n) % 4 {
		case 2:
			if len(same) < 3 {
				same = append(same, n)
			}
		case 1:
			if one == "" {
				one = n
			}
		}
	}
	slices.Sort(same)
	m := EndpointMarks(small, []string{same[1], same[0]}, nil)
	// same[0] < same[1] by name: the first takes position 2 (0x40), the
	// second moves to 3 (0x60), whatever order they are given in.
	if m[same[0]] != 0x40 || m[same[1]] != 0x60 {
		t.Fatalf("collision: %v, want %s=0x40 %s=0x60", m, same[0], same[1])
	}
	if m := EndpointMarks(small, same, nil); len(m) != 2 {
		t.Fatalf("three interfaces in a 2-bit field: %v, want two with values", m)
	} else if _, ok := m[slices.Max(same)]; ok {
		t.Fatalf("the last by name got a value in a full field: %v", m)
	}
	if m := EndpointMarks(small, []string{one}, nil); m[one] != 0x40 {
		t.Fatalf("%s hashes to the non-Calico position 1: got %#x, want the next free 0x40", one, m[one])
	}
	// Host endpoints come after workloads: a host interface colliding
	// with a workload one moves, whatever the names' order.
	if m := EndpointMarks(small, same[1:2], same[:1]); m[same[1]] != 0x40 || m[same[0]] != 0x60 {
		t.Fatalf("workload %s before host %s: %v", same[1], same[0], m)
	}
	if m := EndpointMarks(0, names, nil); len(m) != 0 {
		t.Fatalf("no field: %v", m)
	}
}

// ipvsInput is two workloads and two host endpoints, eth0 with an
// applyOnForward ingress policy and eth1 without.
func ipvsInput() Input {
	fwd := PolicyKey{Name: "fwd"}
	return Input{
		Endpoints: []Endpoint{
			{Iface: "calib", Addrs: []netip.Addr{ip("10.0.0.2")}, Profiles: []string{"open"}},
			{Iface: "calia", Addrs: []netip.Addr{ip("10.0.0.1"), ip("fd00::1")}, Profiles: []string{"open"}},
		},
		HostEndpoints: []HostEndpoint{
			{Name: "h0", Iface: "eth0", ForwardIngressTiers: []Tier{{Name: "default", Policies: []PolicyKey{fwd}}}},
			{Name: "h1", Iface: "eth1"},
		},
		Policies: map[PolicyKey]Policy{fwd: {Key: fwd, Ingress: []api.Rule{{Action: api.ActionAllow}}}},
		Profiles: map[string]Profile{"open": {Ingress: []api.Rule{{Action: api.ActionAllow}}, Egress: []api.Rule{{Action: api.ActionAllow}}}},
	}
}

// TestRenderIPVS renders IPVS mode with the default mask and node ports:
// the INPUT and OUTPUT hooks, the forward check against this-host, the
// per-interface mark chains and the dispatch on the mark, for both IP
// versions.
func TestRenderIPVS(t *testing.T) {
	in := ipvsInput()
	marks := EndpointMarks(0xffe00000, []string{"calia", "calib"}, []string{"eth0", "eth1"})
	for _, v := range []int{4, 6} {
		tb, sets := Render(Config{IPVersion: v, KubeIPVS: true}, in)
		set := fmt.Sprintf("cali%d0this-host", v)
		if !strings.Contains(dumpSets(sets), set+" ") {
			t.Fatalf("v%d: no %s set:\n%s", v, set, dumpSets(sets))
		}
		input := chainLines(t, tb.Filter, ChainInput)
		wantIn := lines(
			"-j MARK --set-xmark 0x0/0xffe00000",
			"-j cali-forward-check",
			"-m mark ! --mark 0x0/0xffe00000 -j RETURN",
			"-i cali+ -g cali-wl-to-host")
		if !strings.HasPrefix(input, wantIn) {
			t.Errorf("v%d cali-INPUT:\n%s\nwant first\n%s", v, input, wantIn)
		}
		if out := chainLines(t, tb.Filter, ChainOutput); !strings.HasPrefix(out, "-m mark ! --mark 0x0/0xffe00000 -g cali-forward-endpoint-mark\n-o cali+ -j RETURN") {
			t.Errorf("v%d cali-OUTPUT:\n%s", v, out)
		}
		check := lines(
			"-m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
			"-p tcp -m multiport --dports 30000:32767 -m set --match-set "+set+" dst -g cali-set-endpoint-mark  # To kubernetes NodePort service",
			"-p udp -m multiport --dports 30000:32767 -m set --match-set "+set+" dst -g cali-set-endpoint-mark  # To kubernetes NodePort service",
			"-m set ! --match-set "+set+" dst -j cali-set-endpoint-mark  # To kubernetes service")
		if got := chainLines(t, tb.Filter, ChainForwardCheck); got != check {
			t.Errorf("v%d cali-forward-check:\n%s\nwant\n%s", v, got, check)
		}
		setMark := lines(
			"-i calia -g cali-sm-calia",
			"-i calib -g cali-sm-calib",
			"-i eth0 -g cali-sm-eth0",
			"-i eth1 -g cali-sm-eth1",
			"-i cali+ -j DROP  # Unknown endpoint",
			"-j MARK --set-xmark 0x200000/0xffe00000  # Non-Cali endpoint mark")
		if got := chainLines(t, tb.Filter, ChainSetEndpointMark); got != setMark {
			t.Errorf("v%d cali-set-endpoint-mark:\n%s\nwant\n%s", v, got, setMark)
		}
		for _, i := range []string{"calia", "calib", "eth0", "eth1"} {
			want := fmt.Sprintf("-j MARK --set-xmark %#x/0xffe00000\n", marks[i])
			if got := chainLines(t, tb.Filter, "cali-sm-"+i); got != want {
				t.Errorf("v%d cali-sm-%s: %s, want %s", v, i, got, want)
			}
		}
		from := lines(
			fmt.Sprintf("-m mark --mark %#x/0xffe00000 -g cali-fw-calia", marks["calia"]),
			fmt.Sprintf("-m mark --mark %#x/0xffe00000 -g cali-fw-calib", marks["calib"]),
			fmt.Sprintf("-m mark --mark %#x/0xffe00000 -g cali-fhfw-eth0", marks["eth0"]),
			fmt.Sprintf("-m mark --mark %#x/0xffe00000 -j RETURN", marks["eth1"]),
			"-j DROP  # Unknown interface")
		if got := chainLines(t, tb.Filter, ChainFromEndpointMark); got != from {
			t.Errorf("v%d cali-from-endpoint-mark:\n%s\nwant\n%s", v, got, from)
		}
		fwd := lines(
			"-m mark ! --mark 0x200000/0xffe00000 -j cali-from-endpoint-mark",
			"-o cali+ -j cali-to-wl-dispatch",
			"-j cali-to-hep-forward",
			"-j MARK --set-xmark 0x0/0xffe00000  # Clear the endpoint mark: an encapsulated copy must not look forwarded",
			"-m mark --mark 0x10000/0x10000 -j ACCEPT  # Policy explicitly accepted packet")
		if got := chainLines(t, tb.Filter, ChainForwardEndpointMark); got != fwd {
			t.Errorf("v%d cali-forward-endpoint-mark:\n%s\nwant\n%s", v, got, fwd)
		}
	}
}

// TestRenderIPVSOptions: the mask moves the field, REJECT and RETURN
// verdicts follow iptablesFilterDenyAction/AllowAction, every workload
// prefix gets its rules, and without host endpoints there is no jump to
// cali-to-hep-forward.
func TestRenderIPVSOptions(t *testing.T) {
	in := ipvsInput()
	in.HostEndpoints = nil
	tb, _ := Render(Config{KubeIPVS: true, MarkMask: 0xff000000, MarkAccept: 0x1000000, MarkPass: 0x2000000, MarkScratch: 0x4000000,
		FilterDenyAction: "Reject", FilterAllowAction: "Return", WorkloadIfacePrefix: "cali,tap"}, in)
	setMark := chainLines(t, tb.Filter, ChainSetEndpointMark)
	for _, want := range []string{"-i cali+ -j REJECT  # Unknown endpoint\n-i tap+ -j REJECT  # Unknown endpoint\n",
		"-j MARK --set-xmark 0x20000000/0xe0000000  # Non-Cali endpoint mark"} {
		if !strings.Contains(setMark, want) {
			t.Errorf("cali-set-endpoint-mark lacks %q:\n%s", want, setMark)
		}
	}
	fwd := lines(
		"-m mark ! --mark 0x20000000/0xe0000000 -j cali-from-endpoint-mark",
		"-o cali+ -j cali-to-wl-dispatch",
		"-o tap+ -j cali-to-wl-dispatch",
		"-j MARK --set-xmark 0x0/0xe0000000  # Clear the endpoint mark: an encapsulated copy must not look forwarded",
		"-m mark --mark 0x1000000/0x1000000 -j RETURN  # Policy explicitly accepted packet")
	if got := chainLines(t, tb.Filter, ChainForwardEndpointMark); got != fwd {
		t.Errorf("cali-forward-endpoint-mark:\n%s\nwant\n%s", got, fwd)
	}
	if from := chainLines(t, tb.Filter, ChainFromEndpointMark); !strings.HasSuffix(from, "-j REJECT  # Unknown interface\n") {
		t.Errorf("cali-from-endpoint-mark:\n%s", from)
	}
}

// TestRenderIPVSNodePorts: node port ranges go into multiport matches of
// at most 15 ports, a range counting as two, a TCP and a UDP rule each.
func TestRenderIPVSNodePorts(t *testing.T) {
	var singles, ranges NodePortRanges
	for i := 0; i < 20; i++ {
		singles = append(singles, api.SinglePort(uint16(30000+i)))
	}
	for i := 0; i < 8; i++ {
		ranges = append(ranges, api.PortRange(uint16(31000+10*i), uint16(31005+10*i)))
	}
	dports := func(ports NodePortRanges) []string {
		tb, _ := Render(Config{KubeIPVS: true, KubeNodePortRanges: ports}, ipvsInput())
		var out []string
		for _, l := range strings.Split(chainLines(t, tb.Filter, ChainForwardCheck), "\n") {
			if strings.HasPrefix(l, "-p tcp") {
				out = append(out, strings.Fields(l)[5])
			} else if strings.HasPrefix(l, "-p udp") && !strings.Contains(l, "--dports "+out[len(out)-1]+" ") {
				t.Fatalf("a UDP rule without its TCP twin: %s", l)
			}
		}
		return out
	}
	got := dports(singles)
	if len(got) != 2 || strings.Count(got[0], ",") != 14 || strings.Count(got[1], ",") != 4 || !strings.HasPrefix(got[1], "30015,") {
		t.Errorf("20 single ports: %q, want 15 + 5", got)
	}
	got = dports(ranges)
	if len(got) != 2 || strings.Count(got[0], ",") != 6 || got[1] != "31070:31075" {
		t.Errorf("8 ranges: %q, want 7 (14 ports) + 1", got)
	}
	got = dports(NodePortRanges{api.PortRange(30000, 30100), api.SinglePort(31000)})
	if len(got) != 1 || got[0] != "30000:30100,31000" {
		t.Errorf("a range and a port: %q", got)
	}
}

// TestRenderIPVSOff: without kube-ipvs0 (KubeIPVS false), or with a mask
// that leaves no endpoint field, the rendering is exactly that of a
// configuration without any IPVS setting: nothing IPVS-related.
func TestRenderIPVSOff(t *testing.T) {
	in := ipvsInput()
	for _, v := range []int{4, 6} {
		plain, plainSets := Render(Config{IPVersion: v}, in)
		for _, cfg := range []Config{
			{IPVersion: v, KubeNodePortRanges: NodePortRanges{api.SinglePort(31000)}, MarkMask: 0xffff0000},
			{IPVersion: v, KubeIPVS: true, MarkMask: 0x1f0000, MarkAccept: 0x10000, MarkPass: 0x20000, MarkScratch: 0x40000},
		} {
			tb, sets := Render(cfg, in)
			if dump(tb) != dump(plain) || dumpSets(sets) != dumpSets(plainSets) {
				t.Errorf("v%d %+v: rendering differs from plain", v, cfg)
			}
			for _, word := range []string{"forward-check", "endpoint-mark", "cali-sm-", "this-host", "0xffe00000"} {
				if strings.Contains(dump(tb)+dumpSets(sets), word) {
					t.Errorf("v%d %+v: %q rendered", v, cfg, word)
				}
			}
		}
	}
}

// TestKernelAcceptsIPVSRules loads an IPVS rendering with workloads,
// host endpoints, split node ports and REJECT into a fresh namespace: the
// kernel and tools take every rule.
func TestKernelAcceptsIPVSRules(t *testing.T) {
	in := ipvsInput()
	var ports NodePortRanges
	for i := 0; i < 10; i++ {
		ports = append(ports, api.PortRange(uint16(30000+100*i), uint16(30050+100*i)))
	}
	for _, v := range []int{4, 6} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			nstest.NeedKernel(t, "unshare", "ipset", "iptables-restore", "ip6tables-restore")
			tb, sets := Render(Config{IPVersion: v, KubeIPVS: true, KubeNodePortRanges: ports, FilterDenyAction: "Reject"}, in)
			loadInNetns(t, v, tb, sets)
		})
	}
}

package ctl_test

import (
	"context"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store/api"
)

var bg = context.Background()

func poolYAML(name, cidr string, extra ...string) string {
	spec := "cidr: " + cidr
	for _, e := range extra {
		spec += ", " + e
	}
	return "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: " + name + "}\nspec: {" + spec + "}\n"
}

func nodeYAML(names ...string) string {
	var docs []string
	for _, n := range names {
		docs = append(docs, "apiVersion: projectcalico.org/v3\nkind: Node\nmetadata: {name: "+n+"}\nspec: {}\n")
	}
	return strings.Join(docs, "---\n")
}

func assignIP(t *testing.T, al *ipam.Allocator, addr, handle, node string) netip.Addr {
	t.Helper()
	a := netip.MustParseAddr(addr)
	if _, err := al.AssignIP(bg, ipam.AssignIPArgs{Addr: a, HandleID: handle, Node: node}); err != nil {
		t.Fatalf("assign %s: %v", addr, err)
	}
	return a
}

func autoAssign(t *testing.T, al *ipam.Allocator, args ipam.AutoAssignArgs) netip.Addr {
	t.Helper()
	args.Num4 = 1
	got, err := al.AutoAssign(bg, args)
	if err != nil || len(got.IPv4) != 1 {
		t.Fatalf("auto-assign %s on %s: %v %v", args.HandleID, args.Node, got, err)
	}
	return got.IPv4[0].Addr()
}

func release(t *testing.T, al *ipam.Allocator, addr netip.Addr) {
	t.Helper()
	if un, err := al.ReleaseIPs(bg, []ipam.ReleaseOptions{{Addr: addr}}); err != nil || len(un) != 0 {
		t.Fatalf("release %s: unallocated %v, %v", addr, un, err)
	}
}

// The expected tables are Calico v3.32's output for the same allocations
// (shared/compat/calicoctl-v3.32-output.txt).
func TestIPAMShowMatchesCalico(t *testing.T) {
	h := newHarness(t)
	al := ipam.New(h.cli)
	h.mustRun(poolYAML("default-ipv4-ippool", "10.48.0.0/16"), "apply", "-f", "-")
	assignIP(t, al, "10.48.166.128", "refnet.refc000aaaa0000000000000000000000", "node1")

	got := h.mustRun("", "ipam", "show", "--show-blocks")
	want := `+----------+------------------+-----------+------------+--------------+
| GROUPING |       CIDR       | IPS TOTAL | IPS IN USE |   IPS FREE   |
+----------+------------------+-----------+------------+--------------+
| IP Pool  | 10.48.0.0/16     |     65536 | 1 (0%)     | 65535 (100%) |
| Block    | 10.48.166.128/26 |        64 | 1 (2%)     | 63 (98%)     |
+----------+------------------+-----------+------------+--------------+
`
	if got != want {
		t.Errorf("ipam show --show-blocks:\n%s\nwant\n%s", got, want)
	}

	got = h.mustRun("", "ipam", "show", "--ip=10.48.166.128")
	ipRe := regexp.MustCompile(`^IP 10\.48\.166\.128 is in use\nHandle ID: refnet\.refc000aaaa0000000000000000000000\n` +
		`Active Owner Attributes:\n  node: node1\n  timestamp: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \+0000 UTC\n$`)
	if !ipRe.MatchString(got) {
		t.Errorf("ipam show --ip:\n%s", got)
	}
	if got := h.mustRun("", "ipam", "show", "--ip", "10.48.166.191"); got != "IP 10.48.166.191 is not currently assigned\n" {
		t.Errorf("ipam show --ip of a free address: %q", got)
	}

	got = h.mustRun("", "ipam", "show", "--show-borrowed")
	want = `+----+----------------+-------+-------------+------+--------------+
| IP | BORROWING-NODE | BLOCK | BLOCK OWNER | TYPE | ALLOCATED-TO |
+----+----------------+-------+-------------+------+--------------+
+----+----------------+-------+-------------+------+--------------+
`
	if got != want {
		t.Errorf("ipam show --show-borrowed:\n%s\nwant\n%s", got, want)
	}

	out, errs, code := h.run("", "ipam", "show", "--show-blocks", "--ip=10.48.166.191")
	if code != 1 || out != "" || !strings.Contains(errs,
		"Usage:\n  calicoctl ipam show [--ip=<IP> | --show-blocks | --show-borrowed | --show-configuration]") {
		t.Errorf("exclusive options: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	// Calico's second capture: three pod IPs, three empty affine blocks and
	// one IPv6 address.
	h.mustRun(poolYAML("default-ipv6-ippool", "fd00:48::/48"), "apply", "-f", "-")
	assignIP(t, al, "10.48.166.130", "refnet.c1", "node1")
	assignIP(t, al, "10.48.166.149", "refnet.c3", "node1")
	assignIP(t, al, "fd00:48:0:df9b:fa8:334a:557b:7741", "refnet.c3", "node1")
	for _, a := range []string{"10.48.166.192", "10.48.167.0", "10.48.167.64"} {
		release(t, al, assignIP(t, al, a, "refnet.tmp", "node1"))
	}
	got = h.mustRun("", "ipam", "show")
	want = `+----------+--------------+------------+------------+-------------------+
| GROUPING |     CIDR     | IPS TOTAL  | IPS IN USE |     IPS FREE      |
+----------+--------------+------------+------------+-------------------+
| IP Pool  | 10.48.0.0/16 |      65536 | 3 (0%)     | 65533 (100%)      |
| IP Pool  | fd00:48::/48 | 1.2089e+24 | 1 (0%)     | 1.2089e+24 (100%) |
+----------+--------------+------------+------------+-------------------+
`
	if got != want {
		t.Errorf("ipam show:\n%s\nwant\n%s", got, want)
	}
	got = h.mustRun("", "ipam", "show", "--show-blocks")
	want = `+----------+---------------------------------------+------------+------------+-------------------+
| GROUPING |                 CIDR                  | IPS TOTAL  | IPS IN USE |     IPS FREE      |
+----------+---------------------------------------+------------+------------+-------------------+
| IP Pool  | 10.48.0.0/16                          |      65536 | 3 (0%)     | 65533 (100%)      |
| Block    | 10.48.166.128/26                      |         64 | 3 (5%)     | 61 (95%)          |
| Block    | 10.48.166.192/26                      |         64 | 0 (0%)     | 64 (100%)         |
| Block    | 10.48.167.0/26                        |         64 | 0 (0%)     | 64 (100%)         |
| Block    | 10.48.167.64/26                       |         64 | 0 (0%)     | 64 (100%)         |
| IP Pool  | fd00:48::/48                          | 1.2089e+24 | 1 (0%)     | 1.2089e+24 (100%) |
| Block    | fd00:48:0:df9b:fa8:334a:557b:7740/122 |         64 | 1 (2%)     | 63 (98%)          |
+----------+---------------------------------------+------------+------------+-------------------+
`
	if got != want {
		t.Errorf("ipam show --show-blocks:\n%s\nwant\n%s", got, want)
	}
}

func TestIPAMShowBorrowed(t *testing.T) {
	h := newHarness(t)
	al := ipam.New(h.cli)
	// A pool of exactly one block: node-a claims it, node-b must borrow.
	h.mustRun(poolYAML("tiny", "10.49.0.0/26", "blockSize: 26"), "apply", "-f", "-")
	autoAssign(t, al, ipam.AutoAssignArgs{HandleID: "k8s-pod-network.a", Node: "node-a"})
	b := autoAssign(t, al, ipam.AutoAssignArgs{HandleID: "k8s-pod-network.b", Node: "node-b",
		Attrs: map[string]string{ipam.AttrPod: "web-1", ipam.AttrNamespace: "prod"}})
	tun := autoAssign(t, al, ipam.AutoAssignArgs{HandleID: "ipip-tunnel-addr-node-c", Node: "node-c",
		Attrs: map[string]string{ipam.AttrType: "ipipTunnelAddress"}, Use: api.IPPoolAllowedUseTunnel})
	if b.String() != "10.49.0.1" || tun.String() != "10.49.0.2" {
		t.Fatalf("borrowed %s and %s, want 10.49.0.1 and 10.49.0.2 (free list order)", b, tun)
	}
	got := h.mustRun("", "ipam", "show", "--show-borrowed")
	want := `+-----------+----------------+--------------+-------------+-------------------+-------------------------+
|    IP     | BORROWING-NODE |    BLOCK     | BLOCK OWNER |       TYPE        |      ALLOCATED-TO       |
+-----------+----------------+--------------+-------------+-------------------+-------------------------+
| 10.49.0.1 | node-b         | 10.49.0.0/26 | node-a      | pod               | prod/web-1              |
| 10.49.0.2 | node-c         | 10.49.0.0/26 | node-a      | ipipTunnelAddress | ipip-tunnel-addr-node-c |
+-----------+----------------+--------------+-------------+-------------------+-------------------------+
`
	if got != want {
		t.Errorf("ipam show --show-borrowed:\n%s\nwant\n%s", got, want)
	}
}

func TestIPAMConfigure(t *testing.T) {
	h := newHarness(t)
	want := `+--------------------+-------+
|      PROPERTY      | VALUE |
+--------------------+-------+
| StrictAffinity     | false |
| AutoAllocateBlocks | true  |
| MaxBlocksPerHost   |     0 |
+--------------------+-------+
`
	if got := h.mustRun("", "ipam", "show", "--show-configuration"); got != want {
		t.Errorf("default configuration:\n%s\nwant\n%s", got, want)
	}
	got := h.mustRun("", "ipam", "configure", "--strictaffinity=true", "--max-blocks-per-host=4")
	if got != "Successfully set StrictAffinity to: true\nSuccessfully set MaxBlocksPerHost to: 4\n" {
		t.Errorf("configure: %q", got)
	}
	got = h.mustRun("", "ipam", "show", "--show-configuration")
	for _, row := range []string{"| StrictAffinity     | true  |", "| AutoAllocateBlocks | true  |", "| MaxBlocksPerHost   |     4 |"} {
		if !strings.Contains(got, row) {
			t.Errorf("after configure, no %q in\n%s", row, got)
		}
	}
	cfg, err := ipam.New(h.cli).GetConfig(bg)
	if err != nil || !cfg.StrictAffinity || cfg.MaxBlocksPerHost != 4 || !cfg.AutoAllocateBlocks {
		t.Errorf("stored config %+v, %v", cfg, err)
	}
	h.mustRun("", "ipam", "configure", "--strictaffinity=false")
	if cfg, _ := ipam.New(h.cli).GetConfig(bg); cfg.StrictAffinity || cfg.MaxBlocksPerHost != 4 {
		t.Errorf("setting one flag changed another: %+v", cfg)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--strictaffinity=maybe"}, `invalid value "maybe" for --strictaffinity`},
		{[]string{"--max-blocks-per-host=-1"}, `invalid value "-1" for --max-blocks-per-host`},
		{[]string{"--max-blocks-per-host=lots"}, `invalid value "lots" for --max-blocks-per-host`},
		{nil, "Usage:\n  calicoctl ipam configure"},
	} {
		_, errs, code := h.run("", append([]string{"ipam", "configure"}, tc.args...)...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("configure %v: exit %d, stderr %q, want %q", tc.args, code, errs, tc.want)
		}
	}
	if cfg, _ := ipam.New(h.cli).GetConfig(bg); cfg.StrictAffinity || cfg.MaxBlocksPerHost != 4 {
		t.Errorf("a rejected configure wrote: %+v", cfg)
	}
}

func TestIPAMUsage(t *testing.T) {
	h := newHarness(t)
	if _, errs, code := h.run("", "ipam"); code != 1 || !strings.Contains(errs, "calicoctl ipam <command>") {
		t.Errorf("ipam: exit %d, %q", code, errs)
	}
	if _, errs, code := h.run("", "ipam", "frob"); code != 1 || !strings.Contains(errs, `unknown command "frob"`) {
		t.Errorf("ipam frob: exit %d, %q", code, errs)
	}
	if _, errs, code := h.run("", "ipam", "release"); code != 1 || !strings.Contains(errs, "calicoctl ipam release (--ip=<IP> | --from-report=<REPORT>)") {
		t.Errorf("ipam release: exit %d, %q", code, errs)
	}
	if _, errs, code := h.run("", "ipam", "show", "--ip=banana"); code != 1 || !strings.Contains(errs, `invalid IP address "banana"`) {
		t.Errorf("ipam show --ip=banana: exit %d, %q", code, errs)
	}
}

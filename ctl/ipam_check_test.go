package ctl_test

import (
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// checkReport is the part of the "ipam check -o" report the tests read.
type checkReport struct {
	Problems  int `json:"problems"`
	LeakedIPs []struct {
		IP             string `json:"ip"`
		Handle         string `json:"handle"`
		SequenceNumber uint64 `json:"sequenceNumber"`
		Node           string `json:"node"`
		Block          string `json:"block"`
	} `json:"leakedIPs"`
	UnallocatedIPs []struct {
		IP     string `json:"ip"`
		InPool bool   `json:"inPool"`
	} `json:"unallocatedIPs"`
	HandlesWithoutIPs []struct {
		Handle string `json:"handle"`
	} `json:"handlesWithoutIPs"`
	MissingHandles []struct {
		Handle string   `json:"handle"`
		IPs    []string `json:"ips"`
	} `json:"missingHandles"`
	StaleAffinities []struct {
		Node  string `json:"node"`
		Block string `json:"block"`
		State string `json:"state"`
	} `json:"staleAffinities"`
}

var problemsRe = regexp.MustCompile(`\nCheck complete; found (\d+) problems\.\n$`)

// check runs "ipam check" and returns its output and problem count.
func (h *harness) check(args ...string) (string, int) {
	h.t.Helper()
	out := h.mustRun("", append([]string{"ipam", "check"}, args...)...)
	m := problemsRe.FindStringSubmatch(out)
	if m == nil {
		h.t.Fatalf("ipam check output does not end with the problem count:\n%s", out)
	}
	n, _ := strconv.Atoi(m[1])
	return out, n
}

func readReport(t *testing.T, path string) checkReport {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r checkReport
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("report: %v\n%s", err, data)
	}
	return r
}

func (h *harness) wep(name, node string, ips ...string) {
	h.t.Helper()
	k, _ := api.LookupKind("WorkloadEndpoint")
	w := k.NewObject().(*api.WorkloadEndpoint)
	w.Metadata.Name, w.Metadata.Namespace = name, "default"
	w.Spec = api.WorkloadEndpointSpec{Orchestrator: "cni", Node: node, ContainerID: name, Endpoint: "eth0",
		InterfaceName: "cali" + name, IPNetworks: ips}
	if _, err := h.cli.CreateResource(bg, w); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) deleteWEP(name string) {
	h.t.Helper()
	k, _ := api.LookupKind("WorkloadEndpoint")
	if _, err := h.cli.DeleteResource(bg, k, "default", name, ""); err != nil {
		h.t.Fatal(err)
	}
}

func held(t *testing.T, al *ipam.Allocator, handle string) []netip.Addr {
	t.Helper()
	got, err := al.IPsByHandle(bg, handle)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestIPAMCheckAndReleaseFromReport(t *testing.T) {
	h := newHarness(t)
	al := ipam.New(h.cli)
	h.mustRun(poolYAML("pool", "10.60.0.0/16"), "apply", "-f", "-")
	h.mustRun(nodeYAML("node1", "node2"), "apply", "-f", "-")
	pod := func(c, node string) netip.Addr {
		return autoAssign(t, al, ipam.AutoAssignArgs{HandleID: "k8s-pod-network." + c, Node: node})
	}
	// In use: pods with endpoints, and node1's tunnel address (node1 exists).
	c1, c3 := pod("c1", "node1"), pod("c3", "node2")
	h.wep("c1", "node1", c1.String()+"/32")
	h.wep("c3", "node2", c3.String()+"/32")
	tun1 := autoAssign(t, al, ipam.AutoAssignArgs{HandleID: "ipip-tunnel-addr-node1", Node: "node1",
		Attrs: map[string]string{ipam.AttrType: "ipipTunnelAddress"}, Use: api.IPPoolAllowedUseTunnel})
	tun2 := autoAssign(t, al, ipam.AutoAssignArgs{HandleID: "ipip-tunnel-addr-node2", Node: "node2",
		Attrs: map[string]string{ipam.AttrType: "ipipTunnelAddress"}, Use: api.IPPoolAllowedUseTunnel})
	h.mustRun("apiVersion: projectcalico.org/v3\nkind: Node\nmetadata: {name: node2}\nspec: {bgp: {ipv4Address: 10.0.0.2/24, ipv4IPIPTunnelAddr: "+
		tun2.String()+"}}\n", "apply", "-f", "-")
	// Leaked: pods without endpoints, everything of a node that is gone, and
	// a pod whose handle was lost as well.
	c2, c4, c5 := pod("c2", "node1"), pod("c4", "node2"), pod("c5", "node-gone")
	tunGone := autoAssign(t, al, ipam.AutoAssignArgs{HandleID: "vxlan-tunnel-addr-node-gone", Node: "node-gone",
		Attrs: map[string]string{ipam.AttrType: "vxlanTunnelAddress"}, Use: api.IPPoolAllowedUseTunnel})
	c6 := pod("c6", "node1")
	if err := h.cli.Delete(bg, store.Key{Kind: store.KindIPAMHandle, Name: "k8s-pod-network.c6"}, ""); err != nil {
		t.Fatal(err)
	}
	// A handle that holds nothing, and endpoints whose addresses IPAM never gave out.
	if _, err := h.cli.Create(bg, store.Key{Kind: store.KindIPAMHandle, Name: "k8s-pod-network.orphan"}, []byte(`{"block":{"10.60.0.0/26":1},"deleted":false}`)); err != nil {
		t.Fatal(err)
	}
	h.wep("c7", "node1", "10.60.250.77/32")
	h.wep("c8", "node2", "192.168.99.9/32")

	report := filepath.Join(t.TempDir(), "report.json")
	out, n := h.check("-o", report, "--show-problem-ips")
	if n != 10 {
		t.Errorf("found %d problems, want 10 (5 leaked, 2 unallocated, 1 empty handle, 1 missing handle, 1 stale affinity):\n%s", n, out)
	}
	for _, line := range []string{
		"Checking IPAM for inconsistencies...\n",
		"Found 5 IPs that are allocated in IPAM but not actually in use.\n",
		"Found 1 in-use IPs that are not in active IP pools.\n",
		"Found 1 in-use IPs that are in active IP pools but have no corresponding IPAM allocation.\n",
		"Found 1 handles with no matching IPs (and 8 handles with matching IPs).\n",
		"Found 1 handles mentioned in blocks with no matching handle resource.\n",
		"Found 1 block affinities of nodes that do not exist.\n",
		"  " + c2.String() + " leaked (handle \"k8s-pod-network.c2\", node \"node1\"",
		"Report written to " + report + ".\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("check output lacks %q:\n%s", line, out)
		}
	}
	r := readReport(t, report)
	var leaked []string
	for _, l := range r.LeakedIPs {
		leaked = append(leaked, l.IP)
		if l.Handle == "" || l.Node == "" || l.Block == "" || !netip.MustParsePrefix(l.Block).Contains(netip.MustParseAddr(l.IP)) {
			t.Errorf("leaked entry incomplete: %+v", l)
		}
	}
	wantLeaked := []string{c2.String(), c4.String(), c5.String(), tunGone.String(), c6.String()}
	slices.Sort(leaked)
	slices.Sort(wantLeaked)
	if !slices.Equal(leaked, wantLeaked) {
		t.Errorf("leaked %v, want %v", leaked, wantLeaked)
	}
	if r.Problems != 10 || len(r.UnallocatedIPs) != 2 || r.UnallocatedIPs[0].IP != "10.60.250.77" || !r.UnallocatedIPs[0].InPool ||
		r.UnallocatedIPs[1].IP != "192.168.99.9" || r.UnallocatedIPs[1].InPool {
		t.Errorf("unallocated %+v (problems %d)", r.UnallocatedIPs, r.Problems)
	}
	if len(r.HandlesWithoutIPs) != 1 || r.HandlesWithoutIPs[0].Handle != "k8s-pod-network.orphan" {
		t.Errorf("handles without IPs %+v", r.HandlesWithoutIPs)
	}
	if len(r.MissingHandles) != 1 || r.MissingHandles[0].Handle != "k8s-pod-network.c6" || !slices.Equal(r.MissingHandles[0].IPs, []string{c6.String()}) {
		t.Errorf("missing handles %+v", r.MissingHandles)
	}
	goneBlock := netip.PrefixFrom(c5, 26).Masked().String()
	if len(r.StaleAffinities) != 1 || r.StaleAffinities[0].Node != "node-gone" || r.StaleAffinities[0].Block != goneBlock ||
		r.StaleAffinities[0].State != "confirmed" {
		t.Errorf("stale affinities %+v, want node-gone %s confirmed", r.StaleAffinities, goneBlock)
	}

	out = h.mustRun("", "ipam", "release", "--from-report="+report)
	for _, line := range []string{
		"Released 5 leaked IPs; skipped 0 ",
		"Deleted 1 handles with no IPs; skipped 0 ",
		"Released 1 block affinities of 1 nodes that do not exist; skipped 0 ",
		"Left 3 problems that release does not fix",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("release output lacks %q:\n%s", line, out)
		}
	}
	for _, hd := range []string{"k8s-pod-network.c2", "k8s-pod-network.c4", "k8s-pod-network.c5", "vxlan-tunnel-addr-node-gone"} {
		if got := held(t, al, hd); len(got) != 0 {
			t.Errorf("%s still holds %v", hd, got)
		}
	}
	for hd, a := range map[string]netip.Addr{"k8s-pod-network.c1": c1, "k8s-pod-network.c3": c3,
		"ipip-tunnel-addr-node1": tun1, "ipip-tunnel-addr-node2": tun2} {
		if got := held(t, al, hd); !slices.Equal(got, []netip.Addr{a}) {
			t.Errorf("in-use %s holds %v, want %s", hd, got, a)
		}
	}
	if _, err := h.cli.Get(bg, store.Key{Kind: store.KindIPAMHandle, Name: "k8s-pod-network.orphan"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("orphan handle: %v, want not found", err)
	}
	affs, err := al.ListAffinities(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range affs {
		if a.Node == "node-gone" {
			t.Errorf("affinity of node-gone survived: %+v", a)
		}
	}

	// What is left needs a person: the endpoints with unallocated addresses.
	if out, n := h.check(); n != 2 {
		t.Errorf("after release: %d problems, want 2:\n%s", n, out)
	}
	h.deleteWEP("c7")
	h.deleteWEP("c8")
	if out, n := h.check("--show-all-ips"); n != 0 {
		t.Errorf("after cleanup: %d problems, want 0:\n%s", n, out)
	} else if !strings.Contains(out, "  "+c1.String()+" in use by workload default/c1") ||
		!strings.Contains(out, "  "+tun1.String()+" tunnel address of node node1") ||
		!strings.Contains(out, "  "+tun2.String()+" in use by node node2 (ipipTunnelAddress)") {
		t.Errorf("--show-all-ips does not list the in-use addresses:\n%s", out)
	}
}

// A report is a snapshot: an address released and handed out again since it
// was written (even to the same handle) must not be freed by it.
func TestIPAMReleaseStaleReport(t *testing.T) {
	h := newHarness(t)
	al := ipam.New(h.cli)
	h.mustRun(poolYAML("pool", "10.61.0.0/16"), "apply", "-f", "-")
	h.mustRun(nodeYAML("node1"), "apply", "-f", "-")
	a := autoAssign(t, al, ipam.AutoAssignArgs{HandleID: "k8s-pod-network.c1", Node: "node1"})
	b := autoAssign(t, al, ipam.AutoAssignArgs{HandleID: "k8s-pod-network.c2", Node: "node1"})
	report := filepath.Join(t.TempDir(), "report.json")
	if out, n := h.check("-o", report); n != 2 {
		t.Fatalf("%d problems, want 2:\n%s", n, out)
	}

	if out := h.mustRun("", "ipam", "release", "--ip="+a.String()); out != "Successfully released IP address "+a.String()+"\n" {
		t.Errorf("release --ip: %q", out)
	}
	_, errs, code := h.run("", "ipam", "release", "--ip", a.String())
	if code != 1 || !strings.Contains(errs, "IP address "+a.String()+" is not assigned") {
		t.Errorf("second release --ip: exit %d, %q", code, errs)
	}
	assignIP(t, al, a.String(), "k8s-pod-network.c1", "node1") // same address, same handle, new allocation
	h.wep("c2", "node1", b.String()+"/32")                     // b is in use now

	out := h.mustRun("", "ipam", "release", "--from-report", report)
	if !strings.Contains(out, "Released 0 leaked IPs; skipped 1 that were released or reallocated since the report and 1 that are in use now.") {
		t.Errorf("stale release: %s", out)
	}
	if got := held(t, al, "k8s-pod-network.c1"); !slices.Equal(got, []netip.Addr{a}) {
		t.Errorf("the reallocated %s was freed: handle holds %v", a, got)
	}
	if got := held(t, al, "k8s-pod-network.c2"); !slices.Equal(got, []netip.Addr{b}) {
		t.Errorf("%s, in use by an endpoint since the report, was freed: handle holds %v", b, got)
	}
	// The new allocation of a has no endpoint either: a fresh check finds it.
	if out, n := h.check("--show-problem-ips"); n != 1 || !strings.Contains(out, "  "+a.String()+" leaked") {
		t.Errorf("after stale release: %d problems:\n%s", n, out)
	}

	if err := os.WriteFile(report, []byte(`{"format":"something-else","leakedIPs":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := h.run("", "ipam", "release", "--from-report", report); code != 1 || !strings.Contains(errs, `format "something-else"`) {
		t.Errorf("foreign report: exit %d, %q", code, errs)
	}
}

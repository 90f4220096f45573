package ctl_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/internal/golden"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

func TestIPAMSplit(t *testing.T) {
	h := newHarness(t)
	al := ipam.New(h.cli)
	// The pool as Calico stored it, with a status our types do not model.
	storetest.PutRaw(t, h.cli, storetest.CalicoObject{Key: "/calico/resources/v3/projectcalico.org/ippools/pool-big",
		Value: `{"kind":"IPPool","apiVersion":"projectcalico.org/v3","metadata":{"name":"pool-big","uid":"ffb648f4-c012-4ebb-8d35-3dbcba519052","creationTimestamp":"2026-11-21T08:25:23Z","labels":{"zone":"a"}},"spec":{"cidr":"10.90.0.0/16","natOutgoing":true,"blockSize":26,"nodeSelector":"all()","vxlanMode":"Never","ipipMode":"Never"},"status":{"future":"kept"}}`})
	h.mustRun(poolYAML("pool-small", "10.91.0.0/24"), "apply", "-f", "-")
	h.mustRun(nodeYAML("node1"), "apply", "-f", "-")
	h.mustRun(poolYAML("pool-x", "10.93.0.0/16")+"---\n"+poolYAML("split-pool-x-1", "10.94.0.0/24"), "apply", "-f", "-")
	inUse := assignIP(t, al, "10.90.200.7", "h1", "node1")

	got := h.transcript(
		[]string{"ipam", "split", "3", "--cidr=10.90.0.0/16"},
		[]string{"ipam", "split", "1", "--name=pool-big"},
		[]string{"ipam", "split", "x", "--name=pool-big"},
		[]string{"ipam", "split", "2"},
		[]string{"ipam", "split", "2", "--cidr=10.99.0.0/16"},
		[]string{"ipam", "split", "8", "--name=pool-small"},
		[]string{"ipam", "split"},
		// A name the split would use is taken: nothing is written.
		[]string{"ipam", "split", "2", "--name=pool-x"},
		[]string{"ipam", "split", "4", "--cidr=10.90.0.0/16"},
		[]string{"get", "ippools", "-o", "wide"},
		[]string{"ipam", "show", "--ip=10.90.200.7"},
	)
	golden.Check(t, "ipam-split", scrubTimestamp(got))

	k := mustKind(t, "IPPool")
	p, err := h.cli.GetResource(bg, k, "", "split-pool-big-3")
	if err != nil {
		t.Fatal(err)
	}
	pool := p.(*api.IPPool)
	if !pool.Spec.NATOutgoing || pool.Spec.BlockSize != 26 || pool.Metadata.Labels["zone"] != "a" || pool.Metadata.UID == "ffb648f4-c012-4ebb-8d35-3dbcba519052" {
		t.Errorf("split pool lost the old pool's settings or kept its uid: %+v", pool)
	}
	if v, _ := storetest.JSONAt(storetest.StoredJSON(t, h.cli, "/calico/resources/v3/projectcalico.org/ippools/split-pool-big-3"), "status.future"); v != "kept" {
		t.Errorf("split pool dropped a stored field our types do not model: status.future = %v", v)
	}
	// The address allocated before the split is still held, and the new
	// pools serve new allocations from the old pool's blocks.
	ips, err := al.IPsByHandle(bg, "h1")
	if err != nil || len(ips) != 1 || ips[0] != inUse {
		t.Errorf("allocation after split: %v %v", ips, err)
	}
	a := autoAssign(t, al, ipam.AutoAssignArgs{HandleID: "h2", Node: "node1", IPv4Pools: []string{"split-pool-big-3"}})
	if !netip.MustParsePrefix("10.90.192.0/18").Contains(a) {
		t.Errorf("allocation from split-pool-big-3 got %s", a)
	}
	// (The two allocations have no endpoint, so check reports them as leaks;
	// what matters is that every allocation lies in an active pool.)
	out, _, _ := h.run("", "ipam", "check")
	if !strings.Contains(out, "Found 7 active IP pools.") || !strings.Contains(out, "Found 0 in-use IPs that are not in active IP pools.") {
		t.Errorf("ipam check after split:\n%s", out)
	}
}

// scrubTimestamp blanks ipam show's allocation timestamp.
func scrubTimestamp(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "timestamp:") {
			lines[i] = "  timestamp: SCRUBBED"
		}
	}
	return strings.Join(lines, "\n")
}

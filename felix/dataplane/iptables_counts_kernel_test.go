package dataplane

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/iptables"
)

// execCounts counts the iptables and ipset commands a Dataplane runs, as
// its Observer is told of them (issue #25: no repeated work).
type execCounts struct {
	saves    []string       // "ipset", "4/filter", ...
	restores map[string]int // per table ("4/filter"), "ipset" for ipset
	netlink  int            // ipset members written over netlink, no process
}

func (c *execCounts) observe(e iptables.Exec) {
	key := "ipset"
	if !e.IPSet {
		key = fmt.Sprintf("%d/%s", e.IPVersion, e.Table)
	}
	switch e.Op {
	case iptables.OpSave:
		c.saves = append(c.saves, key)
	case iptables.OpRestore:
		c.restores[key]++
	case iptables.OpNetlink:
		c.netlink += e.Lines
	}
}

func (c *execCounts) reset() { c.saves, c.restores, c.netlink = nil, map[string]int{}, 0 }

func (c *execCounts) String() string {
	return fmt.Sprintf("saves %v, restores %v, ipset members over netlink %d", c.saves, c.restores, c.netlink)
}

// TestDataplaneIPTablesCommandCounts counts, through the Observer, what
// each apply runs on the way through the test states: after the first
// apply no iptables-save or ipset save at all (the drivers' record of what
// they wrote stands in for the kernel), at most one iptables-restore per
// table and one ipset restore for sets added or changed (plus one for sets
// removed once the tables stop using them), nothing when the state is the
// same; and a periodic resync with nothing drifted writes nothing and
// reads back only the sets (the tables, on iptables-nft, see from the
// kernel's nf_tables generation that nothing changed). A pod added or
// removed whose addresses only join or leave existing sets (a CNI ADD or
// DEL) runs no ipset process at all: its members go over netlink.
func TestDataplaneIPTablesCommandCounts(t *testing.T) {
	needKernel(t)
	t.Parallel()
	states := testStates(t)
	nd := newNode(t, newKernelNS(t, &toolLog{real: map[string]string{"ip": "ip"}}))
	c := &execCounts{}
	nd.dp = New(Config{IPv6: true, Observer: c.observe})
	c.reset()
	nd.to(states[0])
	if len(c.saves) == 0 {
		t.Fatalf("first apply read nothing back: %v", c)
	}
	for _, st := range states[1:] {
		c.reset()
		nd.to(st)
		if len(c.saves) > 0 {
			t.Errorf("%s: an apply ran a save: %v", st.name, c)
		}
		for key, n := range c.restores {
			if limit := map[bool]int{true: 2, false: 1}[key == "ipset"]; n > limit {
				t.Errorf("%s: %d restores of %s in one apply: %v", st.name, n, key, c)
			}
		}
		if len(c.restores) == 0 && c.netlink == 0 {
			t.Errorf("%s: the state changed but nothing was written: %v", st.name, c)
		}
		c.reset()
		nd.apply()
		if len(c.saves)+len(c.restores) > 0 || c.netlink > 0 {
			t.Errorf("%s: the same state applied again ran %v", st.name, c)
		}
	}

	// A pod labelled like the last state's pods, on a new veth: its v4
	// and v6 addresses join selector sets that exist already, then leave
	// them.
	last := states[len(states)-1]
	run(t, nd.ns, "ip", "link", "add", "calitest5", "type", "veth", "peer", "name", "pod5")
	run(t, nd.ns, "ip", "link", "set", "calitest5", "up")
	run(t, nd.ns, "ip", "link", "set", "pod5", "up")
	withPod := dpState{name: "a pod added", ds: maps.Clone(last.ds), bgp: last.bgp}
	withPod.ds.put(t, wep("prod", "p5", "calitest5", "ee:ee:ee:00:01:05",
		map[string]string{"app": "web", "role": "client"}, "10.65.0.20/32", "fd00:65::20/128"))
	for _, st := range []dpState{withPod, {name: "the pod removed", ds: last.ds, bgp: last.bgp}} {
		c.reset()
		nd.to(st)
		if len(c.saves) > 0 || c.restores["ipset"] > 0 || c.netlink < 2 {
			t.Errorf("%s: %v, want no ipset process, the pod's v4 and v6 addresses over netlink", st.name, c)
		}
	}
	c.reset()
	nd.dp.ResyncIPTables()
	nd.dp.ResyncIPSets()
	nd.apply()
	if len(c.restores) > 0 {
		t.Errorf("resync with nothing drifted wrote: %v", c)
	}
	want := "ipset" // the tables see from the nf_tables generation that nothing changed
	if v := run(t, nd.ns, "iptables-save", "--version"); !strings.Contains(v, "nf_tables") {
		want = "ipset 4/raw 4/mangle 4/nat 4/filter 6/raw 6/mangle 6/nat 6/filter" // legacy: no generation to ask
	}
	if got := strings.Join(c.saves, " "); got != want {
		t.Errorf("resync read back %q, want %q", got, want)
	}
	// One rule of ours deleted by hand: the next resync writes that one
	// table, once.
	run(t, nd.ns, "iptables", "-D", "cali-FORWARD", "1")
	c.reset()
	nd.dp.ResyncIPTables()
	nd.apply()
	if len(c.restores) != 1 || c.restores["4/filter"] != 1 || len(c.saves) != 8 {
		t.Errorf("resync after one deleted rule: %v, want every table read back, one restore of 4/filter", c)
	}
}

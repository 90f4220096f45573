package calc_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/store/api"
)

// clusterDatastore: this node and node2 share 10.0.1.0/24, node3 is in
// 10.0.2.0/24, node4 has no address; IP-in-IP (Always, CrossSubnet),
// unencapsulated (IPv4 and IPv6) and VXLAN pools with blocks of each.
func clusterDatastore(t *testing.T) datastore {
	ds := datastore{}
	ds.put(t, ipipPool("ipip", "10.66.0.0/16", api.IPIPModeAlways))
	ds.put(t, ipipPool("ipipcs", "10.67.0.0/16", api.IPIPModeCrossSubnet))
	ds.put(t, pool("flat", "10.70.0.0/16", false))
	ds.put(t, pool("flat6", "fd00:70::/64", false))
	ds.put(t, vxlanPool("vx", "10.65.0.0/16", api.VXLANModeAlways))
	ds.put(t, ipipNode(thisNode, "10.0.1.1/24", "10.66.0.1"))
	n2 := ipipNode("node2", "10.0.1.2/24", "10.66.0.65")
	n2.Spec.BGP.IPv6Address = "fd00:1::2/64"
	ds.put(t, n2)
	ds.put(t, ipipNode("node3", "10.0.2.3/24", "10.66.0.129"))
	n4 := newObj("Node").(*api.Node)
	n4.Metadata.Name = "node4"
	ds.put(t, n4)
	for _, b := range []struct{ cidr, node string }{
		{"10.66.0.0/26", thisNode}, {"10.66.0.64/26", "node2"}, {"10.66.0.128/26", "node3"},
		{"10.67.0.64/26", "node2"}, {"10.67.0.128/26", "node3"},
		{"10.70.0.0/26", thisNode}, {"10.70.0.64/26", "node2"}, {"10.70.0.128/26", "node3"}, {"10.70.0.192/26", "node4"},
		{"fd00:70::40/122", "node2"}, {"10.65.0.64/26", "node2"},
	} {
		ds.block(t, b.cidr, b.node)
	}
	borrow(t, ds, "10.70.0.0/26", 5, "node3") // 10.70.0.5, held by node3
	return ds
}

// renderCluster renders the overlay's routes and what it rejects from BGP.
func renderCluster(d calc.OverlayDesired) string {
	var rs []string
	for p, r := range d.Routes {
		how := "via " + r.Via.String()
		switch {
		case r.Tunnel:
			how += " dev vxlan onlink"
		case r.IPIP:
			how += " dev tunl0 onlink"
		case r.Parent:
			how += " onlink"
		}
		rs = append(rs, fmt.Sprintf("%s %s\n", p, how))
	}
	slices.Sort(rs)
	var covered []string
	for _, p := range []string{"10.66.0.64/26", "10.67.0.0/26", "10.70.0.7/32", "fd00:70::40/122", "10.80.0.0/26"} {
		if d.Covers(netip.MustParsePrefix(p)) {
			covered = append(covered, p)
		}
	}
	return strings.Join(rs, "") + fmt.Sprintf("parents %v %v\nbgp rejected %v covers %v\n", d.Parent4, d.Parent6, d.BGPRejected, covered)
}

func clusterFor(t *testing.T, ds datastore, seed uint64) string {
	t.Helper()
	o := calc.NewOverlay(thisNode)
	keys := sortedKeys(ds)
	rand.New(rand.NewPCG(seed, 3)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for _, k := range keys {
		o.Apply(decode(t, k, ds[k]))
	}
	return renderCluster(o.Desired())
}

func putBGPConfig(t *testing.T, ds datastore, name, pcr string) {
	c := newObj("BGPConfiguration").(*api.BGPConfiguration)
	c.Metadata.Name = name
	c.Spec.ProgramClusterRoutes = pcr
	if name != "default" { // the node.<name> value is refused at write: stored by another writer
		c.Spec.ListenPort = 1790
	}
	ds.put(t, c)
}

// TestClusterRoutes: FelixConfiguration programClusterRoutes Enabled
// routes every other node's blocks (and borrowed addresses) in the pools
// without VXLAN from the datastore: over tunl0 in IP-in-IP pools (direct
// in CrossSubnet to a node in this subnet), directly in unencapsulated
// ones (IPv6 too); nodes without an address get none. BGPConfiguration
// "default" programClusterRoutes Disabled makes those pools' learned
// routes rejected; node.<name> is not read, as in Calico.
func TestClusterRoutes(t *testing.T) {
	enabled := `10.66.0.128/26 via 10.0.2.3 dev tunl0 onlink
10.66.0.64/26 via 10.0.1.2 dev tunl0 onlink
10.67.0.128/26 via 10.0.2.3 dev tunl0 onlink
10.67.0.64/26 via 10.0.1.2 onlink
10.70.0.128/26 via 10.0.2.3 onlink
10.70.0.5/32 via 10.0.2.3 onlink
10.70.0.64/26 via 10.0.1.2 onlink
fd00:70::40/122 via fd00:1::2
parents 10.0.1.1 invalid IP
`
	none := "bgp rejected [] covers []\n"
	noParents := "parents invalid IP invalid IP\n"
	rejected := "bgp rejected [10.66.0.0/16 10.67.0.0/16 10.70.0.0/16 fd00:70::/64] covers [10.66.0.64/26 10.67.0.0/26 10.70.0.7/32 fd00:70::40/122]\n"
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, ds datastore)
		want string
	}{
		{"defaults", func(*testing.T, datastore) {}, noParents + none},
		{"felix Enabled", func(t *testing.T, ds datastore) {
			putFelix(t, "default", func(s *api.FelixConfigurationSpec) { s.ProgramClusterRoutes = "Enabled" })(ds)
		}, enabled + none},
		{"felix Disabled on node.<name>", func(t *testing.T, ds datastore) {
			putFelix(t, "default", func(s *api.FelixConfigurationSpec) { s.ProgramClusterRoutes = "Enabled" })(ds)
			putFelix(t, "node."+thisNode, func(s *api.FelixConfigurationSpec) { s.ProgramClusterRoutes = "Disabled" })(ds)
		}, noParents + none},
		{"bgp Disabled", func(t *testing.T, ds datastore) { putBGPConfig(t, ds, "default", "Disabled") }, noParents + rejected},
		{"bgp Enabled", func(t *testing.T, ds datastore) { putBGPConfig(t, ds, "default", "Enabled") }, noParents + none},
		{"both", func(t *testing.T, ds datastore) {
			putFelix(t, "default", func(s *api.FelixConfigurationSpec) { s.ProgramClusterRoutes = "Enabled" })(ds)
			putBGPConfig(t, ds, "default", "Disabled")
		}, enabled + rejected},
		{"felix Enabled, workload IPs", func(t *testing.T, ds datastore) {
			putFelix(t, "default", func(s *api.FelixConfigurationSpec) {
				s.ProgramClusterRoutes, s.RouteSource = "Enabled", "WorkloadIPs"
			})(ds)
			ds.put(t, wep("default", "a", "node2", "cali1", nil, []string{"10.70.0.70/32"}))
			ds.put(t, wep("default", "b", "node3", "cali2", nil, []string{"10.66.0.130/32"}))
			ds.put(t, wep("default", "c", thisNode, "cali3", nil, []string{"10.70.0.6/32"})) // local: none
			ds.put(t, wep("default", "d", "node2", "cali4", nil, []string{"10.65.0.70/32"})) // VXLAN pool: not a cluster route
		}, "10.66.0.130/32 via 10.0.2.3 dev tunl0 onlink\n10.70.0.70/32 via 10.0.1.2 onlink\nparents 10.0.1.1 invalid IP\n" + none},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := clusterDatastore(t)
			tc.edit(t, ds)
			for seed := uint64(0); seed < 4; seed++ {
				if got := clusterFor(t, ds, seed); got != tc.want {
					t.Fatalf("order %d:\n%s", seed, textDiff(got, tc.want))
				}
			}
		})
	}
}

// TestClusterRoutesLive: the settings change the desired routes as they
// change (the overlay's cached result is dropped).
func TestClusterRoutesLive(t *testing.T) {
	ds := clusterDatastore(t)
	o := calc.NewOverlay(thisNode)
	for _, k := range sortedKeys(ds) {
		o.Apply(decode(t, k, ds[k]))
	}
	count := func() (routes, rejected int) { d := o.Desired(); return len(d.Routes), len(d.BGPRejected) }
	steps := []struct {
		name           string
		change         func(next datastore)
		routes, reject int
	}{
		{"felix Enabled", putFelix(t, "default", func(s *api.FelixConfigurationSpec) { s.ProgramClusterRoutes = "Enabled" }), 8, 0},
		{"bgp Disabled", func(next datastore) { putBGPConfig(t, next, "default", "Disabled") }, 8, 4},
		{"felix Disabled", putFelix(t, "default", func(s *api.FelixConfigurationSpec) { s.ProgramClusterRoutes = "Disabled" }), 0, 4},
		{"bgp deleted", func(next datastore) { next.remove("BGPConfiguration", "", "default") }, 0, 0},
	}
	for _, st := range steps {
		advance(t, &ds, st.change, o.Apply)
		if r, j := count(); r != st.routes || j != st.reject {
			t.Errorf("%s: %d routes, %d rejected pools; want %d, %d", st.name, r, j, st.routes, st.reject)
		}
	}
}

package felix

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/felix/metrics"
	"github.com/calico-aio/calico-aio/felix/peering"
	"github.com/calico-aio/calico-aio/ipam"
)

// TestCalcCacheReusedUntilAnInputChanges: applies with no input changed
// (a kernel refresh, a retry) reuse the calculation's last output instead
// of rendering again; a folded update, an IPv6 change or an explicit
// invalidation (host interfaces, IPVS mode) computes it again, and the new
// output follows the change.
func TestCalcCacheReusedUntilAnInputChanges(t *testing.T) {
	a := calcTestAgent("n1")
	d1 := a.calc.desired(a.state, false)
	if d2 := a.calc.desired(a.state, false); !sameTables(d1, d2) {
		t.Fatal("nothing changed, yet the calculation ran again")
	}
	a.fold(felixUpdate(fc(t, "default", "defaultEndpointToHostAction", `"Accept"`), false))
	d3 := a.calc.desired(a.state, false)
	if sameTables(d1, d3) {
		t.Fatal("a folded update reused the old output")
	}
	if reflect.DeepEqual(d1.Tables, d3.Tables) {
		t.Fatal("defaultEndpointToHostAction Accept rendered the same tables: the test proves nothing")
	}
	if d4 := a.calc.desired(a.state, true); sameTables(d3, d4) || !d4.IPv6 {
		t.Fatal("the IPv6 choice changed, yet the output was reused")
	}
	d5 := a.calc.desired(a.state, true)
	a.calc.invalidate()
	if d6 := a.calc.desired(a.state, true); sameTables(d5, d6) {
		t.Fatal("invalidate did not make the calculation run again")
	}
}

// TestCalcCacheBlockUpdateRecomputesOnlyBlackholes: an IPAM block update
// (every pod ADD and DEL writes one) refreshes the blackholes of this
// node's blocks without rendering the chains again; an endpoint update
// after it renders again.
func TestCalcCacheBlockUpdateRecomputesOnlyBlackholes(t *testing.T) {
	a := calcTestAgent("node1")
	aff := "host:node1"
	blk := &ipam.Block{CIDR: "10.65.0.0/26", Affinity: &aff, Allocations: make([]*int, 64)}
	key := "/calico/ipam/v2/assignment/ipv4/block/10.65.0.0-26"
	d1 := a.calc.desired(a.state, false)
	if len(d1.Blackholes) != 0 {
		t.Fatalf("blackholes %v before any block", d1.Blackholes)
	}
	a.fold(calc.Update{Kind: calc.KindBlock, Key: key, Block: blk})
	d2 := a.calc.desired(a.state, false)
	if !sameTables(d1, d2) {
		t.Error("a block update rendered the chains again")
	}
	if want := []netip.Prefix{netip.MustParsePrefix("10.65.0.0/26")}; !slices.Equal(d2.Blackholes, want) {
		t.Errorf("blackholes after the block update: %v, want %v", d2.Blackholes, want)
	}
	if len(d1.Blackholes) != 0 {
		t.Error("an earlier result's blackholes changed under its holder")
	}
	a.fold(calc.Update{Kind: calc.KindBlock, Key: key, Deleted: true})
	if d3 := a.calc.desired(a.state, false); len(d3.Blackholes) != 0 || !sameTables(d1, d3) {
		t.Errorf("after the block's deletion: blackholes %v, chains rendered again: %v", d3.Blackholes, !sameTables(d1, d3))
	}
	a.fold(testWEP("node1", "local", "cali0000000001", "10.65.0.2/32"))
	if d4 := a.calc.desired(a.state, false); sameTables(d1, d4) {
		t.Error("an endpoint update after a block update reused the old chains")
	}
}

// calcTestAgent is an agent for node with its settings folded in and the
// datastore in sync, its loop not running.
func calcTestAgent(node string) *agent {
	a := &agent{cfg: config.Config{NodeName: node}, state: calc.NewState(node), overlay: calc.NewOverlay(node),
		metrics: metrics.New(node, ""), settings: config.NewLoader(node, spec{}), bgpState: peering.NewState(node, "")}
	a.foldSettings()
	a.state.Apply(calc.Update{InSync: true})
	return a
}

// sameTables says whether two calculations share their tables: the second
// reused the first.
func sameTables(x, y calc.Desired) bool {
	return reflect.ValueOf(x.Tables).Pointer() == reflect.ValueOf(y.Tables).Pointer()
}

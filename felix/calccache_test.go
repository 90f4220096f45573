package felix

import (
	"reflect"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/felix/metrics"
	"github.com/calico-aio/calico-aio/felix/peering"
)

// TestCalcCacheReusedUntilAnInputChanges: applies with no input changed
// (a kernel refresh, a retry) reuse the calculation's last output instead
// of rendering again; a folded update, an IPv6 change or an explicit
// invalidation (host interfaces, IPVS mode) computes it again, and the new
// output follows the change.
func TestCalcCacheReusedUntilAnInputChanges(t *testing.T) {
	a := &agent{cfg: config.Config{NodeName: "n1"}, state: calc.NewState("n1"), overlay: calc.NewOverlay("n1"),
		metrics: metrics.New("n1", ""), settings: config.NewLoader("n1", spec{}), bgpState: peering.NewState("n1", "")}
	a.foldSettings()
	a.state.Apply(calc.Update{InSync: true})
	same := func(x, y calc.Desired) bool {
		return reflect.ValueOf(x.Tables).Pointer() == reflect.ValueOf(y.Tables).Pointer()
	}
	d1 := a.calc.desired(a.state, false)
	if d2 := a.calc.desired(a.state, false); !same(d1, d2) {
		t.Fatal("nothing changed, yet the calculation ran again")
	}
	a.fold(felixUpdate(fc(t, "default", "defaultEndpointToHostAction", `"Accept"`), false))
	d3 := a.calc.desired(a.state, false)
	if same(d1, d3) {
		t.Fatal("a folded update reused the old output")
	}
	if reflect.DeepEqual(d1.Tables, d3.Tables) {
		t.Fatal("defaultEndpointToHostAction Accept rendered the same tables: the test proves nothing")
	}
	if d4 := a.calc.desired(a.state, true); same(d3, d4) || !d4.IPv6 {
		t.Fatal("the IPv6 choice changed, yet the output was reused")
	}
	d5 := a.calc.desired(a.state, true)
	a.calc.invalidate()
	if d6 := a.calc.desired(a.state, true); same(d5, d6) {
		t.Fatal("invalidate did not make the calculation run again")
	}
}

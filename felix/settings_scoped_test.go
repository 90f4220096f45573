package felix

import (
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/felix/config/configtest"
	"github.com/calico-aio/calico-aio/felix/metrics"
	"github.com/calico-aio/calico-aio/felix/node"
	"github.com/calico-aio/calico-aio/felix/peering"
	"github.com/calico-aio/calico-aio/store/api"
)

func nodeWithLabels(name string, labels map[string]string) calc.Update {
	nk, _ := api.LookupKind("Node")
	n := nk.NewObject().(*api.Node)
	n.Metadata.Name, n.Metadata.Labels = name, labels
	return calc.Update{Kind: nk.Plural, Key: configtest.UpdateKey(nk, name), Resource: n}
}

// TestSettingsNodeSelectorScoped: a FelixConfiguration with a nodeSelector
// (named neither default nor node.<name>) applies to the nodes it selects,
// between node.<name> and default, live as the node's labels and the
// objects change; of several matches the oldest wins; the environment
// still wins over all; one without a selector, or another node's, applies
// to no node.
func TestSettingsNodeSelectorScoped(t *testing.T) {
	a := &agent{cfg: config.Config{NodeName: "n1"}, state: calc.NewState("n1"), overlay: calc.NewOverlay("n1"),
		metrics: metrics.New("n1", ""), settings: config.NewLoader("n1", spec{LogSeveritySys: "Error"}),
		bgpState: peering.NewState("n1", ""), tunnels: node.NewTunnelAddrs(nil, "n1")}
	a.foldSettings()
	scoped := func(name, sel, created, field, value string) *api.FelixConfiguration {
		f := fc(t, name, field, value)
		f.Spec.NodeSelector, f.Metadata.CreationTimestamp = sel, created
		return f
	}
	want := func(what, screen string, mtu int) {
		t.Helper()
		cur := a.settings.Current()
		got := 0
		if cur.VXLANMTU != nil {
			got = *cur.VXLANMTU
		}
		if cur.LogSeverityScreen != screen || got != mtu || cur.LogSeveritySys != "Error" {
			t.Errorf("%s: logSeverityScreen %q vxlanMTU %d logSeveritySys %q, want %q %d Error", what, cur.LogSeverityScreen, got, cur.LogSeveritySys, screen, mtu)
		}
	}
	def := fc(t, "default", "logSeverityScreen", `"Warning"`)
	def.Spec.VXLANMTU = ptr(1300)
	a.fold(felixUpdate(def, false))
	gpu := scoped("gpu-nodes", "role == 'gpu'", "2026-01-01T00:00:00Z", "logSeverityScreen", `"Debug"`)
	gpu.Spec.VXLANMTU, gpu.Spec.LogSeveritySys = ptr(1200), "Info"
	a.fold(felixUpdate(gpu, false))
	a.fold(felixUpdate(scoped("no-selector", "", "2020-01-01T00:00:00Z", "logSeverityScreen", `"Fatal"`), false))
	want("node unlabelled", "Warning", 1300)
	a.fold(nodeWithLabels("n2", map[string]string{"role": "gpu"}))
	want("another node labelled", "Warning", 1300)
	a.fold(nodeWithLabels("n1", map[string]string{"role": "gpu"}))
	want("node labelled role=gpu", "Debug", 1200)
	a.fold(felixUpdate(fc(t, "node.n1", "vxlanMTU", `1100`), false))
	want("node.n1 over the scoped one", "Debug", 1100)
	newer := scoped("gpu-newer", "has(role)", "2026-06-01T00:00:00Z", "logSeverityScreen", `"Error"`)
	a.fold(felixUpdate(newer, false))
	want("a newer match is ignored", "Debug", 1100)
	older := scoped("gpu-older", "role in {'gpu'}", "2025-06-01T00:00:00Z", "logSeverityScreen", `"Trace"`)
	a.fold(felixUpdate(older, false))
	want("the oldest match wins", "Trace", 1100)
	a.fold(felixUpdate(older, true))
	a.fold(nodeWithLabels("n1", map[string]string{"role": "cpu"}))
	want("relabelled role=cpu: only has(role) matches", "Error", 1100)
	a.fold(nodeWithLabels("n1", nil))
	want("labels gone", "Warning", 1100)
}

// TestFelixNodeSelectorValidation: nodeSelector is a selector, and only
// on objects named neither default nor node.<name>.
func TestFelixNodeSelectorValidation(t *testing.T) {
	for _, tc := range []struct {
		name, sel string
		ok        bool
	}{
		{"gpu-nodes", "role == 'gpu'", true},
		{"gpu-nodes", "role == ", false},
		{"default", "all()", false},
		{"node.n1", "role == 'gpu'", false},
		{"default", "", true},
	} {
		f := fc(t, tc.name, "nodeSelector", `"`+tc.sel+`"`)
		if err := f.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s nodeSelector %q: %v, want ok %v", tc.name, tc.sel, err, tc.ok)
		}
	}
}

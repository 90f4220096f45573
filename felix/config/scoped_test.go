package config

import (
	"slices"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

func scopedCfg(name, created, sel string) *api.FelixConfiguration {
	f := &api.FelixConfiguration{}
	f.Metadata.Name = name
	f.Metadata.CreationTimestamp = created
	f.Spec.NodeSelector = sel
	return f
}

// The oldest matching selector-scoped object wins and the others are
// named; default, node.<name> and selector-less objects never match.
func TestScopedFor(t *testing.T) {
	cfgs := []*api.FelixConfiguration{
		scopedCfg("default", "2020-01-01T00:00:00Z", "all()"),
		scopedCfg("node.n1", "2020-01-01T00:00:00Z", "all()"),
		scopedCfg("none", "2020-01-01T00:00:00Z", ""),
		nil,
		scopedCfg("newer", "2024-01-01T00:00:00Z", "zone == 'a'"),
		scopedCfg("older", "2023-01-01T00:00:00Z", "zone == 'a'"),
		scopedCfg("other", "2022-01-01T00:00:00Z", "zone == 'b'"),
	}
	pick, ignored := ScopedFor(map[string]string{"zone": "a"}, cfgs)
	if pick == nil || pick.Metadata.Name != "older" || !slices.Equal(ignored, []string{"newer"}) {
		t.Fatalf("ScopedFor = %v, %v; want older, [newer]", pick, ignored)
	}
	if pick, _ := ScopedFor(map[string]string{"zone": "c"}, cfgs); pick != nil {
		t.Fatalf("ScopedFor picked %q for a node no selector matches", pick.Metadata.Name)
	}
	if ScopedName("default") || ScopedName("node.n1") || !ScopedName("rack1") {
		t.Fatal("ScopedName classifies default/node.<name>/rack1 wrongly")
	}
}

package felix

import (
	"slices"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/store/api"
)

func clusterInfo(ready *bool) calc.Update {
	ci := &api.ClusterInformation{}
	ci.Kind, ci.APIVersion = "ClusterInformation", "projectcalico.org/v3"
	ci.Metadata.Name = "default"
	ci.Spec.DatastoreReady = ready
	return calc.Update{Kind: clusterInformationKind, Key: resKey(clusterInformationKind, "default"), Resource: ci}
}

// TestMigrationLockHoldsChanges: while ClusterInformation says
// datastoreReady false (calicoctl datastore migrate lock), a new local
// endpoint does not reach the desired dataplane, nor does the end of the
// initial sync; once it says true they do, in order.
func TestMigrationLockHoldsChanges(t *testing.T) {
	a := newAgent(config.Config{NodeName: "node1", LibDir: t.TempDir(), ResyncInterval: time.Minute}, nil, false)
	yes, no := true, false
	has := func() bool { return hasEndpoint(a, "cali0000000001") }
	a.fold(clusterInfo(&yes))
	a.fold(clusterInfo(&no))
	for _, u := range []calc.Update{testNodeUpdate("node1"), testWEP("node1", "web", "cali0000000001", "10.65.0.2/32"), {InSync: true}} {
		a.fold(u)
	}
	if has() || a.state.InSync() {
		t.Fatalf("locked: the endpoint's route is desired (%v) or the agent is in sync (%v)", has(), a.state.InSync())
	}
	a.fold(clusterInfo(&yes))
	if !has() || !a.state.InSync() {
		t.Fatalf("unlocked: route desired %v, in sync %v", has(), a.state.InSync())
	}
	// Unset means ready, as a ClusterInformation written before the field.
	a.fold(clusterInfo(&no))
	a.fold(clusterInfo(nil))
	a.fold(testWEP("node1", "db", "cali0000000002", "10.65.0.3/32"))
	if !hasEndpoint(a, "cali0000000002") {
		t.Fatal("datastoreReady unset still holds changes")
	}
}

// hasEndpoint: the desired dataplane has a local endpoint on iface.
func hasEndpoint(a *agent, iface string) bool {
	return slices.ContainsFunc(a.state.Desired(false).Endpoints, func(e calc.LocalEndpoint) bool { return e.Iface == iface })
}

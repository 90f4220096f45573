package node

import (
	"context"
	"net/netip"
	"testing"

	"github.com/calico-aio/calico-aio/store/etcdv3"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// Registering the node (addresses, AS number, orchRefs) keeps what Calico
// stored in the Node that we do not model, in spec, spec.bgp and status.
func TestRegisterNodeKeepsUnmodelledFields(t *testing.T) {
	cl := storetest.StartEtcd(t).Client(t)
	var node storetest.CalicoObject
	for _, o := range storetest.CalicoObjectsWithUnmodelledFields() {
		if o.Key == etcdv3.ResourcePrefix+"nodes/node1" {
			node = o
		}
	}
	storetest.PutRaw(t, cl, node)
	if err := Register(context.Background(), cl, "node1", "k8s-node1", netip.MustParsePrefix("10.0.0.2/24"), netip.Prefix{}, 64520); err != nil {
		t.Fatal(err)
	}
	storetest.CheckUnmodelledKept(t, cl, node, "node registration")
	stored := storetest.StoredJSON(t, cl, node.Key)
	if got, _ := storetest.JSONAt(stored, "spec.bgp.ipv4Address"); got != "10.0.0.2/24" {
		t.Errorf("spec.bgp.ipv4Address = %v", got)
	}
	if got, _ := storetest.JSONAt(stored, "spec.orchRefs.0.nodeName"); got != "k8s-node1" {
		t.Errorf("spec.orchRefs = %v", stored["spec"])
	}
	if got, _ := storetest.JSONAt(stored, "status.podCIDRs.0"); got != "10.48.0.0/24" {
		t.Errorf("status.podCIDRs lost: %v", stored["status"])
	}
}

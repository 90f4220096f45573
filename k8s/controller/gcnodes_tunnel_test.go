package controller

import (
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/k8s"
)

// A removed node's VXLAN tunnel address (Calico's handle and attributes,
// as calico-node allocates it) is released with the node (by its node
// attribute, gcnodes.go releaseNodeAddrs); other nodes' stay.
func TestCollectNodesVXLANTunnelAddr(t *testing.T) {
	e := newGCEnv(t)
	e.calicoNode("n1", "k1")
	e.calicoNode("n2", "k2")
	e.kube.nodes = []k8s.Node{{Metadata: k8s.ObjectMeta{Name: "k2"}}}
	tunnel := func(node string) string {
		h := "vxlan-tunnel-addr-" + node
		if _, err := e.al.AutoAssign(e.ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: h, Node: node,
			Attrs: map[string]string{ipam.AttrType: "vxlanTunnelAddress"}}); err != nil {
			t.Fatal(err)
		}
		return h
	}
	t1, t2 := tunnel("n1"), tunnel("n2")
	if err := e.sync(0); err != nil {
		t.Fatal(err)
	}
	if !e.held(t1) || !e.held(t2) {
		t.Fatal("tunnel addresses released before the grace period")
	}
	if err := e.sync(testGrace + time.Second); err != nil {
		t.Fatal(err)
	}
	if e.held(t1) || e.exists(nodeKind, "", "n1") {
		t.Errorf("removed node n1: tunnel address held %v, node exists %v", e.held(t1), e.exists(nodeKind, "", "n1"))
	}
	if !e.held(t2) {
		t.Error("n2's tunnel address was released")
	}
}

package calicoipam_test

import (
	"context"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/calico-aio/calico-aio/e2e/calicoipam"
)

// TestBlockConflictRetried: another host's allocation lands between the
// double's read of the block and its write. The write fails with 409; the
// double undoes its handle increment (the handle, left empty, is marked
// deleted and deleted on its uid), reads the block again and allocates
// anew, the handle first. Both pods end with distinct addresses and the
// IPAM objects agree. (Calico's undo is not in the recording: the order
// below is the double's.)
func TestBlockConflictRetried(t *testing.T) {
	kapi := startAPIServer(t)
	createNamespace(t, kapi, "shop")
	createRecorded(t, kapi, loadObjects(t), "ClusterInformation/default", "IPPool/pool-v4",
		"IPReservation/reserved-tail", "Node/node1")
	pods := []calicoipam.Pod{
		{Node: "node1", Namespace: "shop", Name: "first", ContainerID: "c1"},
		{Node: "node1", Namespace: "shop", Name: "racer", ContainerID: "c2"},
		{Node: "node1", Namespace: "shop", Name: "other-host", ContainerID: "c3"},
	}
	other := newDouble(kapi, nil)
	ctx := context.Background()
	first, err := other.Assign(ctx, pods[0]) // claims the node's block
	if err != nil {
		t.Fatal(err)
	}

	rec := &recorder{}
	var once sync.Once
	var otherAddr netip.Addr
	var otherErr error
	rec.hook = func(req *http.Request) {
		if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/ipamblocks/") {
			once.Do(func() { otherAddr, otherErr = other.Assign(ctx, pods[2]) })
		}
	}
	racer, err := newDouble(kapi, rec).Assign(ctx, pods[1])
	if err != nil || otherErr != nil {
		t.Fatalf("assign: %v; the other host's: %v", err, otherErr)
	}
	if addrs := []netip.Addr{first, racer, otherAddr}; len(slices.Compact(slices.SortedFunc(slices.Values(addrs), netip.Addr.Compare))) != 3 {
		t.Errorf("addresses %v, want three distinct", addrs)
	}

	block := "/apis/crd.projectcalico.org/v1/ipamblocks/10-244-0-0-26"
	handle := "/apis/crd.projectcalico.org/v1/ipamhandles/k8s-pod-network.c2"
	want := []string{
		"update " + block + " 409",
		"get " + handle + " 200",
		"update " + handle + " 200",
		"get " + handle + " 200",
		"delete " + handle + " 200",
		"get " + block + " 200",
		"get " + handle + " 404",
		"create /apis/crd.projectcalico.org/v1/ipamhandles 201",
		"update " + block + " 200",
	}
	got := callLines(rec.take())
	at := slices.Index(got, want[0])
	if at < 0 || len(got)-at < len(want) || !slices.Equal(got[at:at+len(want)], want) {
		t.Errorf("requests after the conflict:\n got %q\nwant %q", got, want)
	}
	checkIPAM(t, kapi, pods, map[string]netip.Addr{
		"k8s-pod-network.c1": first, "k8s-pod-network.c2": racer, "k8s-pod-network.c3": otherAddr})
}

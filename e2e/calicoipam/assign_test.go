package calicoipam_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/calico-aio/calico-aio/e2e/calicoipam"
	"github.com/calico-aio/calico-aio/e2e/kubeapi"
)

// TestTwoDoublesTwentyPods: two doubles (two "hosts", each with its own
// per-node lock) assign 20 pods on two nodes all at once, both starting
// their block search at the same block, so claims and block writes
// collide. No address is handed out twice or lies in a reservation, and
// the blocks, affinities, handles and pod annotations agree. Then all are
// released at once (and again): no handle and no allocation is left.
func TestTwoDoublesTwentyPods(t *testing.T) {
	kapi := startAPIServer(t)
	objects := loadObjects(t)
	createNamespace(t, kapi, "shop")
	createRecorded(t, kapi, objects, "ClusterInformation/default", "IPPool/pool-v4", "IPReservation/reserved-tail")
	nodes := []string{"node1", "node2"}
	for _, n := range nodes {
		mustDo(t, kapi, http.MethodPost, "/api/v1/nodes", obj{"apiVersion": "v1", "kind": "Node",
			"metadata": obj{"name": n, "labels": obj{"kubernetes.io/os": "linux"}}}, http.StatusCreated)
	}
	doubles := []*calicoipam.Double{newDouble(kapi, nil), newDouble(kapi, nil)}
	var pods []calicoipam.Pod
	for i := range 20 {
		p := calicoipam.Pod{Node: nodes[i%2], Namespace: "shop", Name: fmt.Sprintf("pod-%02d", i), ContainerID: fmt.Sprintf("%064x", i+1)}
		mustDo(t, kapi, http.MethodPost, "/api/v1/namespaces/shop/pods", obj{"apiVersion": "v1", "kind": "Pod",
			"metadata": obj{"name": p.Name}, "spec": obj{"nodeName": p.Node,
				"containers": []any{obj{"name": "c", "image": "busybox"}}}}, http.StatusCreated)
		pods = append(pods, p)
	}
	double := func(i int) *calicoipam.Double { return doubles[(i/2)%2] } // each double: 5 pods per node

	addrs := make([]netip.Addr, len(pods))
	each(t, len(pods), func(i int) error {
		a, err := double(i).Assign(context.Background(), pods[i])
		addrs[i] = a
		return err
	})
	t.Logf("conflicts met: %d and %d", doubles[0].Conflicts(), doubles[1].Conflicts())
	if !distinct(addrs) {
		t.Errorf("an address handed out twice: %v", addrs)
	}
	want := map[string]netip.Addr{}
	for i, p := range pods {
		want[doubles[0].HandleID(p)] = addrs[i]
		if got := podAnnotation(t, kapi, p, "podIP"); got != addrs[i].String()+"/32" {
			t.Errorf("%s: podIP annotation %q, assigned %v", p.Name, got, addrs[i])
		}
	}
	checkIPAM(t, doubles[0], pods, want)

	for round := range 2 { // the second round finds nothing to release
		each(t, len(pods), func(i int) error { return double(i+round).Release(context.Background(), pods[i]) })
		checkIPAM(t, doubles[0], pods, map[string]netip.Addr{})
	}
	for _, p := range pods {
		if got := podAnnotation(t, kapi, p, "podIP"); got != "" {
			t.Errorf("%s: podIP annotation %q after the release", p.Name, got)
		}
	}
}

// TestBlockConflictRetried: another host's allocation lands between the
// double's read of the block and its write. The write fails with 409; the
// double undoes its handle increment (the handle, left empty, is marked
// deleted and deleted on its uid), reads the block again and allocates
// anew, the handle first. Both pods end with distinct addresses and the
// IPAM objects agree; releasing them (no Pod objects: no status patch)
// leaves nothing. Calico's undo is not in the recording: the order below
// is the double's.
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
	if addrs := []netip.Addr{first, racer, otherAddr}; !distinct(addrs) {
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
	checkIPAM(t, other, pods, map[string]netip.Addr{
		"k8s-pod-network.c1": first, "k8s-pod-network.c2": racer, "k8s-pod-network.c3": otherAddr})

	// No Pod objects here: the releases skip the pod status patch.
	each(t, len(pods), func(i int) error { return other.Release(ctx, pods[i]) })
	checkIPAM(t, other, pods, map[string]netip.Addr{})
}

// distinct is true when no address is there twice.
func distinct(addrs []netip.Addr) bool {
	return len(slices.Compact(slices.SortedFunc(slices.Values(addrs), netip.Addr.Compare))) == len(addrs)
}

// each runs f(0..n-1) concurrently and fails the test on any error.
func each(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}

func podAnnotation(t *testing.T, kapi *kubeapi.Server, p calicoipam.Pod, name string) string {
	t.Helper()
	var pod struct {
		Metadata struct{ Annotations map[string]string }
	}
	body := mustDo(t, kapi, http.MethodGet, "/api/v1/namespaces/"+p.Namespace+"/pods/"+p.Name, nil, http.StatusOK)
	if err := json.Unmarshal(body, &pod); err != nil {
		t.Fatal(err)
	}
	return pod.Metadata.Annotations["cni.projectcalico.org/"+name]
}

// checkIPAM audits the stored IPAM objects (no problem) and checks they
// hold exactly want (handle ID -> address), each address for its pod on
// its node, none of them reserved.
func checkIPAM(t *testing.T, d *calicoipam.Double, pods []calicoipam.Pod, want map[string]netip.Addr) {
	t.Helper()
	a, err := d.Audit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range a.Problems {
		t.Errorf("IPAM audit: %s", p)
	}
	podOf := map[string]calicoipam.Pod{}
	for _, p := range pods {
		podOf[d.HandleID(p)] = p
	}
	reserved := []netip.Prefix{netip.MustParsePrefix("10.244.0.10/32"), netip.MustParsePrefix("10.244.255.0/24")}
	for _, al := range a.Allocations {
		p := podOf[al.Handle]
		if want[al.Handle] != al.Addr || al.Attrs["pod"] != p.Name || al.Attrs["node"] != p.Node || al.Attrs["namespace"] != p.Namespace {
			t.Errorf("%v in %s is held by %s %v, want %v for pod %+v", al.Addr, al.Block, al.Handle, al.Attrs, want[al.Handle], p)
		}
		if slices.ContainsFunc(reserved, func(r netip.Prefix) bool { return r.Contains(al.Addr) }) {
			t.Errorf("%v is reserved (IPReservation reserved-tail) but was handed out", al.Addr)
		}
	}
	if len(a.Allocations) != len(want) {
		t.Errorf("%d addresses allocated, want %d: %+v", len(a.Allocations), len(want), a.Allocations)
	}
}

// TestIPAMConfigLimits: IPAMConfig's maxBlocksPerHost and
// autoAllocateBlocks stop a node from claiming another block once its
// blocks are full (here /30 blocks of four addresses); lifted, the next
// assign claims one, skipping a reservation listed on the second page.
func TestIPAMConfigLimits(t *testing.T) {
	kapi := startAPIServer(t)
	createRecorded(t, kapi, loadObjects(t), "ClusterInformation/default")
	crd := "/apis/crd.projectcalico.org/v1/"
	mustDo(t, kapi, http.MethodPost, crd+"ippools", obj{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
		"metadata": obj{"name": "small"}, "spec": obj{"cidr": "10.9.0.0/24", "blockSize": 30, "nodeSelector": "all()"}}, http.StatusCreated)
	mustDo(t, kapi, http.MethodPost, crd+"ipamconfigs", obj{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPAMConfig",
		"metadata": obj{"name": "default"}, "spec": obj{"autoAllocateBlocks": true, "strictAffinity": false, "maxBlocksPerHost": 1}}, http.StatusCreated)
	d := newDouble(kapi, nil)
	ctx := context.Background()
	pod := func(i int) calicoipam.Pod {
		return calicoipam.Pod{Node: "node1", Namespace: "shop", Name: fmt.Sprintf("p%d", i), ContainerID: fmt.Sprintf("c%d", i)}
	}
	for i := range 4 {
		if _, err := d.Assign(ctx, pod(i)); err != nil {
			t.Fatalf("assign %d of the block's 4: %v", i, err)
		}
	}
	setConfig := func(field string, v any) {
		c := decodeExact(t, mustDo(t, kapi, http.MethodGet, crd+"ipamconfigs/default", nil, http.StatusOK))
		c["spec"].(obj)[field] = v
		mustDo(t, kapi, http.MethodPut, crd+"ipamconfigs/default", c, http.StatusOK)
	}
	if a, err := d.Assign(ctx, pod(4)); err == nil || !strings.Contains(err.Error(), "maxBlocksPerHost 1") {
		t.Errorf("fifth assign with maxBlocksPerHost 1: %v %v, want refused naming maxBlocksPerHost", a, err)
	}
	setConfig("maxBlocksPerHost", 0)
	setConfig("autoAllocateBlocks", false)
	if a, err := d.Assign(ctx, pod(4)); err == nil || !strings.Contains(err.Error(), "autoAllocateBlocks false") {
		t.Errorf("fifth assign with autoAllocateBlocks false: %v %v, want refused naming autoAllocateBlocks", a, err)
	}
	setConfig("autoAllocateBlocks", true)
	// 501 reservations: the one that matters, last by name, comes on the
	// second page of the list.
	for i := range 500 {
		reserve(t, kapi, fmt.Sprintf("r%03d", i), fmt.Sprintf("10.10.%d.%d/32", i/250, i%250))
	}
	reserve(t, kapi, "zz-last", "10.9.0.4/32")
	a, err := d.Assign(ctx, pod(4))
	if err != nil || a != netip.MustParseAddr("10.9.0.5") {
		t.Errorf("fifth assign with the limits lifted: %v %v, want 10.9.0.5 (the next block's first address is reserved)", a, err)
	}
}

func reserve(t *testing.T, kapi *kubeapi.Server, name, cidr string) {
	t.Helper()
	mustDo(t, kapi, http.MethodPost, "/apis/crd.projectcalico.org/v1/ipreservations", obj{"apiVersion": "crd.projectcalico.org/v1",
		"kind": "IPReservation", "metadata": obj{"name": name}, "spec": obj{"reservedCIDRs": []string{cidr}}}, http.StatusCreated)
}

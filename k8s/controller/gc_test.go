package controller

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

func TestCandidates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	grace := 10 * time.Second
	var cs candidates
	if due := cs.observe([]string{"a", "b"}, t0, grace); len(due) != 0 {
		t.Fatalf("due at first sight: %v", due)
	}
	if due := cs.observe([]string{"a", "b"}, t0.Add(grace-time.Nanosecond), grace); len(due) != 0 {
		t.Fatalf("due before the grace period: %v", due)
	}
	// b comes back (not seen orphaned), c is new.
	if due := cs.observe([]string{"a", "c"}, t0.Add(grace), grace); !slices.Equal(due, []string{"a"}) {
		t.Fatalf("due %v, want [a]", due)
	}
	// b is orphaned again: its grace period starts over.
	if due := cs.observe([]string{"a", "b", "c"}, t0.Add(grace+time.Second), grace); !slices.Equal(due, []string{"a"}) {
		t.Fatalf("due %v, want [a]", due)
	}
	if due := cs.observe([]string{"a", "b", "c"}, t0.Add(2*grace+time.Second), grace); !slices.Equal(due, []string{"a", "b", "c"}) {
		t.Fatalf("due %v, want [a b c]", due)
	}
	cs.forget("a")
	if got := cs.since("a"); !got.IsZero() {
		t.Errorf("forgotten a still since %v", got)
	}
	if got := cs.since("b"); !got.Equal(t0.Add(grace + time.Second)) {
		t.Errorf("b since %v", got)
	}
}

// gcEnv is a controller on a real etcd with an IP pool, a fake API and a
// clock the test moves.
type gcEnv struct {
	t    *testing.T
	ctx  context.Context
	cl   *store.Client
	al   *ipam.Allocator
	kube *fakeKube
	c    *Controller
	now  time.Time
}

const testGrace = time.Minute

func newGCEnv(t *testing.T) *gcEnv {
	e := &gcEnv{t: t, ctx: context.Background(), cl: storetest.StartEtcd(t).Client(t), kube: &fakeKube{}, now: time.Unix(1_700_000_000, 0)}
	e.al = ipam.New(e.cl)
	k, _ := api.LookupKind("IPPool")
	p := k.NewObject().(*api.IPPool)
	p.Metadata.Name = "pods"
	p.Spec.CIDR = "10.65.0.0/16"
	if _, err := e.cl.CreateResource(e.ctx, p); err != nil {
		t.Fatal(err)
	}
	e.c = newController(e.cl, e.kube)
	e.c.LeakGracePeriod = testGrace
	e.c.Logf = t.Logf
	e.c.now = func() time.Time { return e.now }
	return e
}

func pod(ns, name string, labels map[string]string) k8s.Pod {
	return k8s.Pod{Metadata: k8s.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}

// addPodNet allocates an address for pod ns/name on node as the CNI plugin
// does and writes its endpoint; it returns the handle.
func (e *gcEnv) addPodNet(node, ns, name string) string {
	e.t.Helper()
	handle := "k8s-pod-network.c" + name
	got, err := e.al.AutoAssign(e.ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: handle, Node: node,
		Attrs: map[string]string{ipam.AttrNamespace: ns, ipam.AttrPod: name}})
	if err != nil {
		e.t.Fatal(err)
	}
	w := wepKind.NewObject().(*api.WorkloadEndpoint)
	w.Metadata.Namespace, w.Metadata.Name = ns, node+"-k8s-"+name+"-eth0"
	w.Metadata.Labels = k8s.PodLabels(pod(ns, name, nil))
	w.Spec = api.WorkloadEndpointSpec{Orchestrator: k8s.OrchestratorK8s, Node: node, Pod: name, Endpoint: "eth0",
		ContainerID: "c" + name, InterfaceName: "cali" + name, IPNetworks: []string{netip.PrefixFrom(got.Addrs()[0], 32).String()},
		Profiles: []string{"kns." + ns}}
	if _, err := e.cl.CreateResource(e.ctx, w); err != nil {
		e.t.Fatal(err)
	}
	return handle
}

// sync moves the clock to at after the start and makes one full pass.
func (e *gcEnv) sync(at time.Duration) error {
	e.now = time.Unix(1_700_000_000, 0).Add(at)
	return e.c.Sync(e.ctx)
}

func (e *gcEnv) held(handle string) bool {
	e.t.Helper()
	ips, err := e.al.IPsByHandle(e.ctx, handle)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(ips) > 0
}

func (e *gcEnv) exists(kind api.KindInfo, ns, name string) bool {
	e.t.Helper()
	_, err := e.cl.GetResource(e.ctx, kind, ns, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		e.t.Fatal(err)
	}
	return err == nil
}

// podNet checks whether pod ns/name's address and endpoint are there.
func (e *gcEnv) podNet(node, ns, name string, want bool) {
	e.t.Helper()
	if got := e.held("k8s-pod-network.c" + name); got != want {
		e.t.Errorf("pod %s/%s: address held %v, want %v", ns, name, got, want)
	}
	if got := e.exists(wepKind, ns, node+"-k8s-"+name+"-eth0"); got != want {
		e.t.Errorf("pod %s/%s: endpoint exists %v, want %v", ns, name, got, want)
	}
}

func TestCollectPods(t *testing.T) {
	e := newGCEnv(t)
	e.kube.pods = []k8s.Pod{pod("shop", "live", nil)}
	e.addPodNet("n1", "shop", "live")
	e.addPodNet("n1", "shop", "gone")
	// Not a pod's: never touched.
	if _, err := e.al.AutoAssign(e.ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "cni.plain", Node: "n1"}); err != nil {
		t.Fatal(err)
	}
	check := func(gone bool) {
		t.Helper()
		e.podNet("n1", "shop", "live", true)
		e.podNet("n1", "shop", "gone", !gone)
		if !e.held("cni.plain") {
			t.Error("plain CNI address released")
		}
	}

	if err := e.sync(0); err != nil {
		t.Fatal(err)
	}
	check(false)
	if err := e.sync(testGrace - time.Second); err != nil {
		t.Fatal(err)
	}
	check(false)

	// Past the grace period, but the confirming GET fails: kept.
	e.kube.getErr = errors.New("API down")
	if err := e.sync(testGrace); err == nil {
		t.Error("a failed confirmation reported no error")
	}
	check(false)
	e.kube.getErr = nil

	// The pod list fails: nothing released, and the candidates stay.
	e.kube.listPodsErr = errors.New("API down")
	if err := e.sync(testGrace + time.Second); err == nil {
		t.Error("a failed pod list reported no error")
	}
	check(false)
	e.kube.listPodsErr = nil

	if err := e.sync(testGrace + 2*time.Second); err != nil {
		t.Fatal(err)
	}
	check(true)

	// Idempotent: nothing more to do.
	if err := e.sync(2 * testGrace); err != nil {
		t.Fatal(err)
	}
	check(true)
}

func TestCollectPodsReappearing(t *testing.T) {
	e := newGCEnv(t)
	e.addPodNet("n1", "shop", "web")
	web := pod("shop", "web", nil)
	step := func(at time.Duration, want bool) {
		t.Helper()
		if err := e.sync(at); err != nil {
			t.Fatal(err)
		}
		e.podNet("n1", "shop", "web", want)
	}
	step(0, true) // candidate from 0
	e.kube.pods = []k8s.Pod{web}
	step(testGrace/2, true) // back: forgotten
	e.kube.pods = nil
	step(testGrace, true)              // candidate again, from here
	step(testGrace+testGrace/2, true)  // not yet
	e.kube.hiddenPods = []k8s.Pod{web} // the list misses it, the GET finds it
	step(2*testGrace, true)            // due, but the GET says it exists: forgotten
	gets := e.kube.gets
	e.kube.hiddenPods = nil
	step(2*testGrace+time.Second, true) // candidate again: no GET before the grace period
	if e.kube.gets != gets {
		t.Errorf("%d GETs before the grace period", e.kube.gets-gets)
	}
	step(3*testGrace+time.Second, false)
}

// A pod recreated under the same name after its first incarnation's DEL
// never came: the old address is released once the pod reports other
// addresses, the new one never; a pod reporting none keeps everything.
func TestCollectPodsRecreatedSameName(t *testing.T) {
	e := newGCEnv(t)
	old, err := e.al.AutoAssign(e.ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "k8s-pod-network.cold", Node: "n1",
		Attrs: map[string]string{ipam.AttrNamespace: "shop", ipam.AttrPod: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	e.addPodNet("n1", "shop", "web") // the new incarnation: handle k8s-pod-network.cweb
	cur, err := e.al.IPsByHandle(e.ctx, "k8s-pod-network.cweb")
	if err != nil || len(cur) != 1 {
		t.Fatalf("new address: %v %v", cur, err)
	}
	web := pod("shop", "web", nil)
	e.kube.pods = []k8s.Pod{web} // no podIPs yet: the pod owns both
	step := func(at time.Duration, oldHeld bool) {
		t.Helper()
		if err := e.sync(at); err != nil {
			t.Fatal(err)
		}
		if got := e.held("k8s-pod-network.cold"); got != oldHeld {
			t.Errorf("at %v: old address %s held %v, want %v", at, old.Addrs()[0], got, oldHeld)
		}
		e.podNet("n1", "shop", "web", true)
	}
	step(0, true)
	step(2*testGrace, true)
	web.Status.PodIPs = []k8s.PodIP{{IP: cur[0].String()}}
	e.kube.pods = []k8s.Pod{web}
	step(2*testGrace+time.Second, true) // candidate from here
	step(3*testGrace, true)             // not yet
	// Due, but the GET shows the pod reporting the old address after all
	// (the list was older): kept and forgotten.
	e.kube.pods = nil
	e.kube.hiddenPods = []k8s.Pod{func() k8s.Pod {
		p := web
		p.Status.PodIPs = []k8s.PodIP{{IP: old.Addrs()[0].String()}, {IP: cur[0].String()}}
		return p
	}()}
	e.now = time.Unix(1_700_000_000, 0).Add(3*testGrace + time.Second)
	if err := e.c.collectPods(e.ctx); err != nil {
		t.Fatal(err)
	}
	if !e.held("k8s-pod-network.cold") {
		t.Fatal("released although the GET showed the pod holding it")
	}
	e.kube.hiddenPods = nil
	e.kube.pods = []k8s.Pod{web}
	step(3*testGrace+2*time.Second, true) // observed again from here
	step(4*testGrace+2*time.Second, false)
	if !e.held("k8s-pod-network.cweb") {
		t.Error("the pod's own address was released")
	}
}

func TestCollectPodsDisabled(t *testing.T) {
	e := newGCEnv(t)
	e.c.LeakGracePeriod = 0
	e.addPodNet("n1", "shop", "gone")
	for _, at := range []time.Duration{0, time.Hour, 24 * time.Hour} {
		if err := e.sync(at); err != nil {
			t.Fatal(err)
		}
	}
	e.podNet("n1", "shop", "gone", true)
}

// calicoNode writes Calico Node name with a k8s orchRef to ref (none when
// ref is "").
func (e *gcEnv) calicoNode(name, ref string) {
	e.t.Helper()
	n := nodeKind.NewObject().(*api.Node)
	n.Metadata.Name = name
	if ref != "" {
		n.Spec.OrchRefs = []api.OrchRef{{NodeName: ref, Orchestrator: k8s.OrchestratorK8s}}
	}
	if _, err := e.cl.CreateResource(e.ctx, n); err != nil {
		e.t.Fatal(err)
	}
}

func (e *gcEnv) affinities(node string) int {
	e.t.Helper()
	affs, err := e.al.ListAffinities(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, a := range affs {
		if a.Node == node {
			n++
		}
	}
	return n
}

func TestCollectNodes(t *testing.T) {
	e := newGCEnv(t)
	// n1 stands for Kubernetes node k1, which is gone; n2 has no orchRef;
	// n3's Kubernetes node exists.
	e.calicoNode("n1", "k1")
	e.calicoNode("n2", "")
	e.calicoNode("n3", "k3")
	e.kube.nodes = []k8s.Node{{Metadata: k8s.ObjectMeta{Name: "k3"}}}
	// Their pods still exist in the API (no pod GC without a
	// controller-manager): only the node's removal releases them.
	e.kube.pods = []k8s.Pod{pod("shop", "a", nil), pod("shop", "b", nil), pod("shop", "c", nil)}
	e.addPodNet("n1", "shop", "a")
	e.addPodNet("n2", "shop", "b")
	e.addPodNet("n3", "shop", "c")
	tunnel := "ipip-tunnel-addr-n1"
	if _, err := e.al.AutoAssign(e.ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: tunnel, Node: "n1"}); err != nil {
		t.Fatal(err)
	}
	check := func(n1Gone bool) {
		t.Helper()
		e.podNet("n1", "shop", "a", !n1Gone)
		if got := e.held(tunnel); got == n1Gone {
			t.Errorf("n1 tunnel address held %v", got)
		}
		if got := e.affinities("n1"); (got == 0) != n1Gone {
			t.Errorf("n1 has %d affinities", got)
		}
		if got := e.exists(nodeKind, "", "n1"); got == n1Gone {
			t.Errorf("node n1 exists %v", got)
		}
		for _, n := range []string{"n2", "n3"} {
			if !e.exists(nodeKind, "", n) || e.affinities(n) == 0 {
				t.Errorf("node %s or its affinity removed", n)
			}
		}
		e.podNet("n2", "shop", "b", true)
		e.podNet("n3", "shop", "c", true)
	}

	if err := e.sync(0); err != nil {
		t.Fatal(err)
	}
	check(false)
	e.kube.listNodesErr = errors.New("API down")
	if err := e.sync(testGrace); err == nil {
		t.Error("a failed node list reported no error")
	}
	check(false)
	e.kube.listNodesErr = nil
	e.kube.hiddenNodes = []k8s.Node{{Metadata: k8s.ObjectMeta{Name: "k1"}}}
	if err := e.sync(testGrace + time.Second); err != nil {
		t.Fatal(err)
	}
	check(false) // the GET found it: forgotten
	e.kube.hiddenNodes = nil
	if err := e.sync(2 * testGrace); err != nil {
		t.Fatal(err)
	}
	check(false) // orphaned again, from here
	if err := e.sync(3 * testGrace); err != nil {
		t.Fatal(err)
	}
	check(true)
}

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/k8s/controller"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// TestK8sController runs two kube-controllers instances under leader
// election against a real kube-apiserver and checks that the datastore
// follows namespaces, service accounts and NetworkPolicies, and that the
// second instance takes over when the leader stops.
func TestK8sController(t *testing.T) {
	t.Parallel()
	calico := storetest.StartEtcd(t)
	cl := calico.Client(t)
	kapi := kubeapi.Start(t, storetest.StartEtcd(t).Endpoints()[0])

	do := func(method, path string, body any, want int) {
		t.Helper()
		if code, out := kapi.Do(t, method, path, body); code != want {
			t.Fatalf("%s %s: %d %s", method, path, code, out)
		}
	}
	nsObj := func(labels map[string]string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": "shop", "labels": labels}}
	}
	npObj := map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": "web", "namespace": "shop"},
		"spec": map[string]any{
			"podSelector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"ingress": []any{map[string]any{
				"from":  []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"role": "fe"}}}},
				"ports": []any{map[string]any{"port": 80}}}},
		}}
	do(http.MethodPost, "/api/v1/namespaces", nsObj(map[string]string{"team": "a"}), http.StatusCreated)
	do(http.MethodPost, "/api/v1/namespaces/shop/serviceaccounts", map[string]any{"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": map[string]any{"name": "api", "labels": map[string]string{"tier": "back"}}}, http.StatusCreated)
	do(http.MethodPost, "/apis/networking.k8s.io/v1/namespaces/shop/networkpolicies", npObj, http.StatusCreated)

	// An object the controller must not touch.
	ctx := context.Background()
	other := ctlProfileKind().NewObject().(*api.Profile)
	other.Metadata.Name = "mine"
	if _, err := cl.CreateResource(ctx, other); err != nil {
		t.Fatal(err)
	}

	type inst struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	var mu sync.Mutex
	leader := ""
	start := func(id string) inst {
		c, err := controller.New(cl, kapi.KubeconfigPath)
		if err != nil {
			t.Fatal(err)
		}
		c.Resync = 300 * time.Millisecond
		c.Logf = func(format string, args ...any) {
			msg := fmt.Sprintf(format, args...)
			if msg == "kube-controllers "+id+": elected leader" {
				mu.Lock()
				leader = id
				mu.Unlock()
			}
			t.Log(msg)
		}
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = controller.RunElected(cctx, cl, id, c) }()
		return inst{cancel, done}
	}
	insts := map[string]inst{"a": start("a"), "b": start("b")}
	t.Cleanup(func() {
		for _, i := range insts {
			i.cancel()
			<-i.done
		}
	})

	profileLabels := func(name string, want map[string]string) func() error {
		return func() error {
			r, err := cl.GetResource(ctx, ctlProfileKind(), "", name)
			if err != nil {
				return err
			}
			if got := r.(*api.Profile).Spec.LabelsToApply; !reflect.DeepEqual(got, want) {
				return fmt.Errorf("labelsToApply %v, want %v", got, want)
			}
			return nil
		}
	}
	policyIs := func(obj map[string]any) func() error {
		var np k8s.NetworkPolicy
		b, _ := json.Marshal(obj)
		if err := json.Unmarshal(b, &np); err != nil {
			t.Fatal(err)
		}
		want, err := k8s.NetworkPolicyToCalico(np)
		if err != nil {
			t.Fatal(err)
		}
		want.Default()
		return func() error {
			r, err := cl.GetResource(ctx, ctlPolicyKind(), "shop", "knp.default.web")
			if err != nil {
				return err
			}
			got := r.(*api.NetworkPolicy)
			if !reflect.DeepEqual(got.Spec, want.Spec) {
				g, _ := json.Marshal(got.Spec)
				w, _ := json.Marshal(want.Spec)
				return fmt.Errorf("spec %s, want %s", g, w)
			}
			return nil
		}
	}

	eventually(t, 10*time.Second, "kns.shop", profileLabels("kns.shop", map[string]string{"pcns.team": "a", "pcns.projectcalico.org/name": "shop", "pcns.kubernetes.io/metadata.name": "shop"}))
	eventually(t, 10*time.Second, "ksa.shop.api", profileLabels("ksa.shop.api", map[string]string{"pcsa.tier": "back", "pcsa.projectcalico.org/name": "api"}))
	eventually(t, 10*time.Second, "knp.default.web", policyIs(npObj))

	// Updates follow.
	do(http.MethodPut, "/api/v1/namespaces/shop", nsObj(map[string]string{"team": "b"}), http.StatusOK)
	npObj["spec"].(map[string]any)["podSelector"] = map[string]any{"matchLabels": map[string]any{"app": "web2"}}
	do(http.MethodPut, "/apis/networking.k8s.io/v1/namespaces/shop/networkpolicies/web", npObj, http.StatusOK)
	eventually(t, 10*time.Second, "kns.shop updated", profileLabels("kns.shop", map[string]string{"pcns.team": "b", "pcns.projectcalico.org/name": "shop", "pcns.kubernetes.io/metadata.name": "shop"}))
	eventually(t, 10*time.Second, "knp.default.web updated", policyIs(npObj))

	// Deletion follows.
	do(http.MethodDelete, "/apis/networking.k8s.io/v1/namespaces/shop/networkpolicies/web", nil, http.StatusOK)
	eventually(t, 10*time.Second, "knp.default.web deleted", func() error {
		_, err := cl.GetResource(ctx, ctlPolicyKind(), "shop", "knp.default.web")
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})

	// The leader stops; the other takes over and applies a further change.
	mu.Lock()
	first := leader
	mu.Unlock()
	if first == "" {
		t.Fatal("no leader elected")
	}
	insts[first].cancel()
	<-insts[first].done
	delete(insts, first)
	stopped := time.Now()
	do(http.MethodPut, "/api/v1/namespaces/shop", nsObj(map[string]string{"team": "c"}), http.StatusOK)
	eventually(t, 10*time.Second, "kns.shop updated by the new leader", profileLabels("kns.shop", map[string]string{"pcns.team": "c", "pcns.projectcalico.org/name": "shop", "pcns.kubernetes.io/metadata.name": "shop"}))
	mu.Lock()
	second := leader
	mu.Unlock()
	if second == first {
		t.Fatalf("leader still %s after it stopped", first)
	}
	t.Logf("%s took over from %s in %v", second, first, time.Since(stopped).Round(time.Millisecond))

	if _, err := cl.GetResource(ctx, ctlProfileKind(), "", "mine"); err != nil {
		t.Errorf("profile mine: %v", err)
	}
}

func ctlProfileKind() api.KindInfo { k, _ := api.LookupKind("Profile"); return k }
func ctlPolicyKind() api.KindInfo  { k, _ := api.LookupKind("NetworkPolicy"); return k }

// TestK8sControllerPods runs the controller against a real kube-apiserver
// and checks what it does for pods and nodes: it reacts to watch events
// well before its resync (a NetworkPolicy, a pod's labels), and it releases
// the addresses and endpoints of deleted pods and the Calico Node of a
// deleted Kubernetes node only after the grace period, leaving everything
// still in use alone.
func TestK8sControllerPods(t *testing.T) {
	t.Parallel()
	kapi := kubeapi.Start(t, storetest.StartEtcd(t).Endpoints()[0])
	do := func(t *testing.T, method, path string, body any, want int) {
		t.Helper()
		if code, out := kapi.Do(t, method, path, body); code != want {
			t.Fatalf("%s %s: %d %s", method, path, code, out)
		}
	}
	const ns = "kc"
	do(t, http.MethodPost, "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": ns}}, http.StatusCreated)
	createPod := func(t *testing.T, name string, labels map[string]string) {
		t.Helper()
		do(t, http.MethodPost, "/api/v1/namespaces/"+ns+"/pods", map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": name, "labels": labels},
			"spec": map[string]any{"nodeName": "node1", "serviceAccountName": "shopper",
				"containers": []any{map[string]any{"name": "app", "image": "registry.k8s.io/pause:3.10"}}}}, http.StatusCreated)
	}
	// run starts a controller on a fresh Calico datastore.
	run := func(t *testing.T, resync, grace time.Duration) *store.Client {
		cl := storetest.StartEtcd(t).Client(t)
		c, err := controller.New(cl, kapi.KubeconfigPath)
		if err != nil {
			t.Fatal(err)
		}
		c.Resync, c.LeakGracePeriod, c.Logf = resync, grace, t.Logf
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = c.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		eventually(t, 10*time.Second, "first sync", func() error {
			_, err := cl.GetResource(ctx, ctlProfileKind(), "", "kns."+ns)
			return err
		})
		return cl
	}

	t.Run("watch", func(t *testing.T) {
		ctx := context.Background()
		cl := run(t, time.Minute, controller.DefaultLeakGracePeriod)

		// A pod's label change reaches its endpoint; the reserved labels
		// come from the pod's namespace and spec, not from its labels.
		createPod(t, "web", map[string]string{"app": "web"})
		pod := k8s.Pod{Metadata: k8s.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{"app": "web"}},
			Spec: k8s.PodSpec{ServiceAccountName: "shopper"}}
		w := kcEndpoint(ns, "node1", "web", "ctr-web", netip.MustParseAddr("10.96.0.5"))
		w.Metadata.Labels = k8s.PodLabels(pod)
		w.Spec.ServiceAccountName = "shopper"
		if _, err := cl.CreateResource(ctx, w); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		do(t, http.MethodPatch, "/api/v1/namespaces/"+ns+"/pods/web", map[string]any{"metadata": map[string]any{
			"labels": map[string]any{"app": "web2", "tier": "front", api.LabelNamespace: "bank"}}}, http.StatusOK)
		want := map[string]string{"app": "web2", "tier": "front", api.LabelNamespace: ns,
			api.LabelOrchestrator: "k8s", api.LabelServiceAccount: "shopper"}
		eventually(t, 5*time.Second, "endpoint labels", func() error {
			r, err := cl.GetResource(ctx, kcWEPKind(), ns, w.Metadata.Name)
			if err != nil {
				return err
			}
			got := r.(*api.WorkloadEndpoint)
			if !reflect.DeepEqual(got.Metadata.Labels, want) {
				return fmt.Errorf("labels %v, want %v", got.Metadata.Labels, want)
			}
			if !reflect.DeepEqual(got.Spec, w.Spec) {
				return fmt.Errorf("spec changed: %+v", got.Spec)
			}
			return nil
		})
		t.Logf("pod labels on the endpoint %v after the change", time.Since(began).Round(time.Millisecond))

		// A NetworkPolicy reaches the datastore long before the resync.
		began = time.Now()
		do(t, http.MethodPost, "/apis/networking.k8s.io/v1/namespaces/"+ns+"/networkpolicies", map[string]any{
			"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": map[string]any{"name": "web"},
			"spec": map[string]any{"podSelector": map[string]any{}}}, http.StatusCreated)
		eventually(t, 5*time.Second, "knp.default.web", func() error {
			_, err := cl.GetResource(ctx, ctlPolicyKind(), ns, "knp.default.web")
			return err
		})
		t.Logf("NetworkPolicy in the datastore %v after its create", time.Since(began).Round(time.Millisecond))
	})

	t.Run("gc", func(t *testing.T) {
		ctx := context.Background()
		const grace = 2 * time.Second
		cl := storetest.StartEtcd(t).Client(t)
		al := ipam.New(cl)
		pool := kcKind("IPPool").NewObject().(*api.IPPool)
		pool.Metadata.Name, pool.Spec.CIDR = "kc-pods", "10.96.0.0/16"
		if _, err := cl.CreateResource(ctx, pool); err != nil {
			t.Fatal(err)
		}
		// Pods wired as the CNI plugin does: address and endpoint.
		podNet := func(name string) (handle, wep string) {
			createPod(t, name, nil)
			handle = "k8s-pod-network.ctr-" + name
			got, err := al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: handle, Node: "node1",
				Attrs: map[string]string{ipam.AttrNamespace: ns, ipam.AttrPod: name}})
			if err != nil {
				t.Fatal(err)
			}
			w := kcEndpoint(ns, "node1", name, "ctr-"+name, got.Addrs()[0])
			if _, err := cl.CreateResource(ctx, w); err != nil {
				t.Fatal(err)
			}
			return handle, w.Metadata.Name
		}
		goneHandle, goneWEP := podNet("gone")
		liveHandle, liveWEP := podNet("live")
		assign := func(handle, node string) {
			if _, err := al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: handle, Node: node}); err != nil {
				t.Fatal(err)
			}
		}
		assign("net1.ctr-plain", "node1") // plain CNI: no pod attributes

		// Calico Nodes: node1 and node2 stand for Kubernetes nodes, node3
		// has no orchRef (and no Kubernetes node).
		for _, n := range []struct{ name, ref string }{{"node1", "k8s-node1"}, {"node2", "k8s-node2"}, {"node3", ""}} {
			node := kcKind("Node").NewObject().(*api.Node)
			node.Metadata.Name = n.name
			if n.ref != "" {
				node.Spec.OrchRefs = []api.OrchRef{{NodeName: n.ref, Orchestrator: "k8s"}}
				do(t, http.MethodPost, "/api/v1/nodes", map[string]any{"apiVersion": "v1", "kind": "Node",
					"metadata": map[string]any{"name": n.ref}}, http.StatusCreated)
			}
			if _, err := cl.CreateResource(ctx, node); err != nil {
				t.Fatal(err)
			}
		}
		assign("ipip-tunnel-addr-node2", "node2")
		assign("ipip-tunnel-addr-node3", "node3")

		held := func(handle string) bool {
			ips, err := al.IPsByHandle(ctx, handle)
			if err != nil {
				t.Fatal(err)
			}
			return len(ips) > 0
		}
		exists := func(kind api.KindInfo, namespace, name string) bool {
			_, err := cl.GetResource(ctx, kind, namespace, name)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Fatal(err)
			}
			return err == nil
		}
		affinities := func(node string) int {
			affs, err := al.ListAffinities(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, a := range affs {
				if a.Node == node {
					n++
				}
			}
			return n
		}

		c, err := controller.New(cl, kapi.KubeconfigPath)
		if err != nil {
			t.Fatal(err)
		}
		c.Resync, c.LeakGracePeriod, c.Logf = 200*time.Millisecond, grace, t.Logf
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = c.Run(cctx) }()
		t.Cleanup(func() { cancel(); <-done })

		deleted := time.Now()
		do(t, http.MethodDelete, "/api/v1/namespaces/"+ns+"/pods/gone", map[string]any{"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}, http.StatusOK)
		do(t, http.MethodDelete, "/api/v1/nodes/k8s-node2", nil, http.StatusOK)
		released := map[string]time.Duration{}
		checks := map[string]func() bool{
			"address of deleted pod":  func() bool { return !held(goneHandle) },
			"endpoint of deleted pod": func() bool { return !exists(kcWEPKind(), ns, goneWEP) },
			"node2":                   func() bool { return !exists(kcKind("Node"), "", "node2") },
		}
		for len(released) < len(checks) && time.Since(deleted) < grace+10*time.Second {
			for what, gone := range checks {
				if _, ok := released[what]; !ok && gone() {
					released[what] = time.Since(deleted)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		for what := range checks {
			d, ok := released[what]
			switch {
			case !ok:
				t.Errorf("%s not released within %v", what, grace+10*time.Second)
			case d < grace:
				t.Errorf("%s released %v after the delete, before the grace period %v", what, d, grace)
			default:
				t.Logf("%s released %v after the delete", what, d.Round(time.Millisecond))
			}
		}
		if held("ipip-tunnel-addr-node2") || affinities("node2") != 0 {
			t.Errorf("node2: tunnel address held %v, %d affinities", held("ipip-tunnel-addr-node2"), affinities("node2"))
		}
		blocks, err := al.ListBlocks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			if b.Block.AffineTo("node2") {
				t.Errorf("block %s still affine to node2", b.Prefix)
			}
		}
		// Still in use, or not a Kubernetes pod's or node's: untouched.
		if !held(liveHandle) || !exists(kcWEPKind(), ns, liveWEP) {
			t.Error("the live pod's address or endpoint was released")
		}
		if !held("net1.ctr-plain") {
			t.Error("the plain CNI address was released")
		}
		for _, n := range []string{"node1", "node3"} {
			if !exists(kcKind("Node"), "", n) || affinities(n) == 0 {
				t.Errorf("%s or its block affinity was removed", n)
			}
		}
		if !held("ipip-tunnel-addr-node3") {
			t.Error("node3's tunnel address was released")
		}
	})
}

// kcEndpoint is the WorkloadEndpoint the CNI plugin writes for pod
// ns/pod's eth0 on node.
func kcEndpoint(ns, node, pod, containerID string, addr netip.Addr) *api.WorkloadEndpoint {
	w := kcWEPKind().NewObject().(*api.WorkloadEndpoint)
	w.Metadata.Namespace, w.Metadata.Name = ns, node+"-k8s-"+pod+"-eth0"
	w.Spec = api.WorkloadEndpointSpec{Orchestrator: "k8s", Node: node, Pod: pod, Endpoint: "eth0",
		ContainerID: containerID, InterfaceName: "cali" + containerID[len(containerID)-4:],
		IPNetworks: []string{netip.PrefixFrom(addr, addr.BitLen()).String()}, Profiles: []string{"kns." + ns}}
	return w
}

func kcWEPKind() api.KindInfo { return kcKind("WorkloadEndpoint") }

func kcKind(kind string) api.KindInfo { k, _ := api.LookupKind(kind); return k }

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/kdd/derive"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// kubeCNIEnv is a CNI host whose plugin reads pods from a real
// kube-apiserver. The apiserver runs in the test's own namespace with its own
// etcd; the plugin runs in the host namespace, whose loopback is another
// one, so a relay listening there forwards to the apiserver.
type kubeCNIEnv struct {
	*cniEnv
	api        *kubeapi.Server
	kubeconfig string // the plugin's: the apiserver through the relay
	// ds is the plugin's datastore (cni_kdd_test.go): etcd, or the
	// apiserver's custom resources.
	ds datastore
	// node is the netconf's nodename ("": node1).
	node string
}

func (e *kubeCNIEnv) nodeName() string {
	if e.node == "" {
		return "node1"
	}
	return e.node
}

// newKubeCNIEnv is a kubeCNIEnv whose plugin keeps its datastore in etcd.
func newKubeCNIEnv(t testing.TB, hostIndex int) *kubeCNIEnv {
	return newKubeCNIEnvOn(t, hostIndex, onEtcd)
}

// startAPI starts the apiserver and the relay the plugin reaches it by.
func (e *kubeCNIEnv) startAPI(t testing.TB, opts ...kubeapi.Option) {
	e.api = kubeapi.Start(t, storetest.StartEtcd(t).Endpoints()[0], opts...)
	relay := e.relay(t, strings.TrimPrefix(e.api.URL, "https://"))
	e.kubeconfig = e.writeKubeconfig(t, "https://"+relay)
}

// relay is relayIn the host namespace.
func (e *kubeCNIEnv) relay(t testing.TB, target string) string {
	return relayIn(t, e.host.ns, target)
}

// relayIn listens on namespace n's loopback and forwards each connection
// to target in the test's namespace. It returns its address.
func relayIn(t testing.TB, n ns.NetNS, target string) string {
	var l net.Listener
	if err := n.Do(func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return l.Addr().String()
}

// writeKubeconfig writes a kubeconfig for the admin user and server (the
// serving cert is for 127.0.0.1, so any loopback port will do).
func (e *kubeCNIEnv) writeKubeconfig(t testing.TB, server string) string {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, certificate-authority: %q}
users:
- name: admin
  user: {token: %q}
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
`, server, e.api.CAFile, e.api.Token)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// do sends a request to the API and fails unless the status is want; it
// returns the body.
func (e *kubeCNIEnv) do(t testing.TB, method, path string, obj any, want int) []byte {
	t.Helper()
	code, body := e.api.Do(t, method, path, obj)
	if code != want {
		t.Fatalf("%s %s: %d %s", method, path, code, body)
	}
	return body
}

// create POSTs an object.
func (e *kubeCNIEnv) create(t testing.TB, path string, obj map[string]any) {
	t.Helper()
	e.do(t, http.MethodPost, path, obj, http.StatusCreated)
}

// createPod creates a pod bound to node1 whose container has the ports
// "http" 8080 and an unnamed 9000.
func (e *kubeCNIEnv) createPod(t testing.TB, namespace, name, sa string, labels, annotations map[string]string) {
	t.Helper()
	e.createPodWith(t, namespace, name, sa, labels, annotations,
		[]map[string]any{{"name": "http", "containerPort": 8080}, {"containerPort": 9000}})
}

// createPodWith creates a pod bound to node1 with one container and its
// ports; sa "" leaves the service account out.
func (e *kubeCNIEnv) createPodWith(t testing.TB, namespace, name, sa string, labels, annotations map[string]string, ports []map[string]any) {
	t.Helper()
	spec := map[string]any{
		"nodeName":   "node1",
		"containers": []map[string]any{{"name": "app", "image": "registry.k8s.io/pause:3.10", "ports": ports}},
	}
	if sa != "" {
		spec["serviceAccountName"] = sa
	}
	e.create(t, "/api/v1/namespaces/"+namespace+"/pods", map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "labels": labels, "annotations": annotations}, "spec": spec})
}

// conflist is a Kubernetes-style calico network; extra is more top-level
// fields, ipamConf the ipam section.
func (e *kubeCNIEnv) conflist(kubeconfig, extra, ipamConf string) *libcni.NetworkConfigList {
	return e.conflistV("1.0.0", kubeconfig, extra, ipamConf)
}

// conflistV is conflist at a CNI version.
func (e *kubeCNIEnv) conflistV(version, kubeconfig, extra, ipamConf string) *libcni.NetworkConfigList {
	return e.cniEnv.conflist(version, "k8s-pod-network", fmt.Sprintf(`{"type":"calico","nodename":%q,
%s,"calico_lib_dir":%q,"calico_run_dir":%q,"log_level":"info",
"kubernetes":{"kubeconfig":%q},"policy":{"type":"k8s"}%s,"ipam":%s}`,
		e.nodeName(), e.datastoreKeys(), e.state+"/lib", e.state+"/run", kubeconfig, extra, ipamConf))
}

// podRuntime is the kubelet's CNI call for pod namespace/name, in a fresh
// network namespace.
func podRuntime(t testing.TB, namespace, name string) *libcni.RuntimeConf {
	return podRuntimeIn(newNS(t), namespace, name)
}

// podRuntimeIn is the kubelet's CNI call for pod namespace/name in n.
func podRuntimeIn(n ns.NetNS, namespace, name string) *libcni.RuntimeConf {
	id := "ctr-" + namespace + "-" + name
	return &libcni.RuntimeConf{ContainerID: id, NetNS: n.Path(), IfName: "eth0", Args: [][2]string{
		{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", namespace}, {"K8S_POD_NAME", name}, {"K8S_POD_INFRA_CONTAINER_ID", id}}}
}

func (e *kubeCNIEnv) endpoint(t *testing.T, namespace, pod string) *api.WorkloadEndpoint {
	t.Helper()
	r, err := e.cl.GetResource(context.Background(), wepKindInfo(), namespace, derive.WorkloadEndpointName(e.nodeName(), pod, "eth0"))
	if err != nil {
		t.Fatalf("endpoint of %s/%s: %v", namespace, pod, err)
	}
	return r.(*api.WorkloadEndpoint)
}

func (e *kubeCNIEnv) profile(t *testing.T, name string) *api.Profile {
	t.Helper()
	k, _ := api.LookupKind("Profile")
	r, err := e.cl.GetResource(context.Background(), k, "", name)
	if err != nil {
		t.Fatalf("profile %s: %v", name, err)
	}
	return r.(*api.Profile)
}

// addOK adds the pod and returns its IPv4 address.
func (e *kubeCNIEnv) addOK(t *testing.T, l *libcni.NetworkConfigList, rt *libcni.RuntimeConf) string {
	t.Helper()
	res, err := e.add(l, rt)
	if err != nil {
		t.Fatalf("ADD %s: %v", rt.ContainerID, err)
	}
	v4, _ := podAddrs(res)
	return v4
}

// addFails expects ADD to fail naming want, and to leave nothing behind.
func (e *kubeCNIEnv) addFails(t *testing.T, l *libcni.NetworkConfigList, rt *libcni.RuntimeConf, want ...string) {
	t.Helper()
	_, err := e.add(l, rt)
	if err == nil {
		t.Fatalf("ADD %s succeeded", rt.ContainerID)
	}
	t.Logf("ADD %s: %v", rt.ContainerID, err)
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("ADD %s: error %q does not say %q", rt.ContainerID, err, w)
		}
	}
	e.assertClean()
}

// delOK deletes the pod and expects nothing left (of any pod).
func (e *kubeCNIEnv) delOK(t *testing.T, l *libcni.NetworkConfigList, rt *libcni.RuntimeConf) {
	t.Helper()
	if err := e.del(l, rt); err != nil {
		t.Fatalf("DEL %s: %v", rt.ContainerID, err)
	}
	e.assertClean()
}

// TestCNIK8sPods runs on etcd and on the Kubernetes datastore, each by
// both paths (in-process, and served by calico-node on the same
// datastore), the two datastores in parallel.
func TestCNIK8sPods(t *testing.T) {
	t.Parallel()
	t.Run("kubernetes", func(t *testing.T) {
		t.Parallel()
		forEachCNIPath(t, func(t *testing.T, path cniPath) { testCNIK8sPods(t, path, newKubeCNIEnvOn(t, 249, onKube)) })
	})
	forEachCNIPath(t, func(t *testing.T, path cniPath) { testCNIK8sPods(t, path, newKubeCNIEnv(t, 9)) })
}

func testCNIK8sPods(t *testing.T, path cniPath, e *kubeCNIEnv) {
	kdd := e.ds == onKube
	e.servePath(path, "node1")
	e.pool("default-v4", "10.120.0.0/24")
	e.pool("pod-pool", "10.121.0.0/24")
	e.pool("ns-pool", "10.122.0.0/24")
	calicoIPAM := `{"type":"calico-ipam","ipv4_pools":["default-v4"]}`

	e.create(t, "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "shop", "labels": map[string]string{"team": "payments"}}})
	e.create(t, "/api/v1/namespaces/shop/serviceaccounts", map[string]any{"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": map[string]any{"name": "shopper", "labels": map[string]string{"role": "buyer"}}})
	e.create(t, "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "pooled", "annotations": map[string]string{"cni.projectcalico.org/ipv4pools": `["ns-pool"]`}}})

	t.Run("labels profiles ipAddrs floatingIPs hwAddr", func(t *testing.T) {
		e.t = t
		annotations := map[string]string{
			"cni.projectcalico.org/ipAddrs":     `["10.120.0.77"]`,
			"cni.projectcalico.org/floatingIPs": `["203.0.113.9"]`,
			"cni.projectcalico.org/hwAddr":      "c2:b0:57:49:47:f1",
		}
		l := e.conflist(e.kubeconfig, `,"feature_control":{"floating_ips":true}`, calicoIPAM)
		e.createPod(t, "shop", "web", "shopper", map[string]string{"app": "web", "projectcalico.org/namespace": "forged"}, annotations)
		rt := podRuntime(t, "shop", "web")
		if ip := e.addOK(t, l, rt); ip != "10.120.0.77" {
			t.Errorf("ipAddrs: got %s, want 10.120.0.77", ip)
		}
		e.wantPodAddress(t, rt, "shop", "web", "10.120.0.77")
		w := e.endpoint(t, "shop", "web")
		wantLabels := map[string]string{"app": "web", "projectcalico.org/namespace": "shop",
			"projectcalico.org/orchestrator": "k8s", "projectcalico.org/serviceaccount": "shopper"}
		if fmt.Sprint(w.Metadata.Labels) != fmt.Sprint(wantLabels) {
			t.Errorf("labels %v, want %v", w.Metadata.Labels, wantLabels)
		}
		if !slices.Equal(w.Spec.Profiles, []string{"kns.shop", "ksa.shop.shopper"}) || w.Spec.Pod != "web" ||
			w.Spec.ServiceAccountName != "shopper" || w.Spec.Orchestrator != "k8s" {
			t.Errorf("endpoint spec: %+v", w.Spec)
		}
		if len(w.Spec.Ports) != 1 || w.Spec.Ports[0].Name != "http" || w.Spec.Ports[0].Port != 8080 {
			t.Errorf("ports %+v, want the named port http 8080 only", w.Spec.Ports)
		}
		// On Kubernetes the endpoint derives its NAT from the pod's
		// floatingIPs annotation and carries no MAC, as Calico's.
		if len(w.Spec.IPNATs) != 1 || w.Spec.IPNATs[0] != (api.IPNAT{InternalIP: "10.120.0.77", ExternalIP: "203.0.113.9"}) {
			t.Errorf("ipNATs %+v", w.Spec.IPNATs)
		}
		if wantMAC := map[bool]string{false: "c2:b0:57:49:47:f1", true: ""}[kdd]; w.Spec.MAC != wantMAC {
			t.Errorf("endpoint MAC %q, want %q", w.Spec.MAC, wantMAC)
		}
		if mac := podMAC(t, rt.NetNS); mac != "c2:b0:57:49:47:f1" {
			t.Errorf("pod interface MAC %s", mac)
		}
		nsLabels := e.profile(t, "kns.shop").Spec.LabelsToApply
		if nsLabels["pcns.team"] != "payments" || nsLabels["pcns.projectcalico.org/name"] != "shop" {
			t.Errorf("kns.shop labels %v", nsLabels)
		}
		saLabels := e.profile(t, "ksa.shop.shopper").Spec.LabelsToApply
		if saLabels["pcsa.role"] != "buyer" || saLabels["pcsa.projectcalico.org/name"] != "shopper" {
			t.Errorf("ksa.shop.shopper labels %v", saLabels)
		}
		if kdd {
			// On Kubernetes DEL asks the API first, as Calico's.
			e.delOK(t, l, rt)
			e.wantPodCleared(t, rt, "shop", "web")
			return
		}
		// DEL needs no API: a netconf whose API is unreachable still tears down.
		e.delOK(t, e.conflist(e.writeKubeconfig(t, e.api.URL), "", calicoIPAM), rt)
	})

	t.Run("ipv4pools pod then namespace", func(t *testing.T) {
		e.t = t
		e.createPod(t, "pooled", "by-ns", "", nil, nil)
		e.createPod(t, "pooled", "by-pod", "", nil, map[string]string{"cni.projectcalico.org/ipv4pools": `["pod-pool"]`})
		e.createPod(t, "shop", "plain", "", nil, nil)
		e.createPod(t, "shop", "orphan", "nobody", nil, nil) // its service account does not exist
		l := e.conflist(e.kubeconfig, "", calicoIPAM)
		cases := []struct{ ns, pod, prefix string }{
			{"pooled", "by-ns", "10.122.0."}, {"pooled", "by-pod", "10.121.0."}, {"shop", "plain", "10.120.0."}, {"shop", "orphan", "10.120.0."}}
		var rts []*libcni.RuntimeConf
		for _, c := range cases {
			rt := podRuntime(t, c.ns, c.pod)
			res, err := e.add(l, rt)
			if err != nil {
				t.Fatalf("ADD %s: %v", rt.ContainerID, err)
			}
			ip, _ := podAddrs(res)
			if !strings.HasPrefix(ip, c.prefix) {
				t.Errorf("%s/%s: address %s, want one in %s0/24", c.ns, c.pod, ip, c.prefix)
			}
			// As Calico's result: a route to the address with its block's mask.
			if len(res.Routes) != 1 || res.Routes[0].Dst.String() != ip+"/26" {
				t.Errorf("%s/%s: result routes %v, want one to %s/26", c.ns, c.pod, res.Routes, ip)
			}
			rts = append(rts, rt)
		}
		if p := e.endpoint(t, "shop", "plain").Spec.Profiles; !slices.Equal(p, []string{"kns.shop"}) {
			t.Errorf("pod without a service account: profiles %v", p)
		}
		if kdd {
			// Profiles are derived there: none for a missing account.
			k, _ := api.LookupKind("Profile")
			if _, err := e.cl.GetResource(context.Background(), k, "", "ksa.shop.nobody"); err == nil {
				t.Errorf("profile of a missing service account exists on Kubernetes")
			}
		} else if l := e.profile(t, "ksa.shop.nobody").Spec.LabelsToApply; fmt.Sprint(l) != "map[pcsa.projectcalico.org/name:nobody]" {
			t.Errorf("profile of an unreadable service account: labels %v", l)
		}
		for _, rt := range rts {
			if err := e.del(l, rt); err != nil {
				t.Errorf("DEL %s: %v", rt.ContainerID, err)
			}
		}
		e.assertClean()
	})

	t.Run("refused without the feature", func(t *testing.T) {
		e.t = t
		e.createPod(t, "shop", "floaty", "", nil, map[string]string{"cni.projectcalico.org/floatingIPs": `["203.0.113.10"]`})
		e.createPod(t, "shop", "fixed", "", nil, map[string]string{"cni.projectcalico.org/ipAddrsNoIpam": `["192.0.2.55"]`})
		e.createPod(t, "shop", "badmac", "", nil, map[string]string{"cni.projectcalico.org/hwAddr": "01:00:5e:00:00:01"})
		e.createPod(t, "shop", "both", "", nil, map[string]string{
			"cni.projectcalico.org/ipAddrs": `["10.120.0.78"]`, "cni.projectcalico.org/ipAddrsNoIpam": `["10.120.0.78"]`})
		l := e.conflist(e.kubeconfig, "", calicoIPAM)
		e.addFails(t, l, podRuntime(t, "shop", "floaty"), "pod shop/floaty", "cni.projectcalico.org/floatingIPs", "floating_ips")
		e.addFails(t, l, podRuntime(t, "shop", "fixed"), "pod shop/fixed", "cni.projectcalico.org/ipAddrsNoIpam", "ip_addrs_no_ipam")
		e.addFails(t, l, podRuntime(t, "shop", "badmac"), "pod shop/badmac", "cni.projectcalico.org/hwAddr", "multicast")
		e.addFails(t, e.conflist(e.kubeconfig, `,"feature_control":{"ip_addrs_no_ipam":true}`, calicoIPAM),
			podRuntime(t, "shop", "both"), "pod shop/both", "cni.projectcalico.org/ipAddrs")

		// With the feature on, the address is used as given, outside IPAM.
		l = e.conflist(e.kubeconfig, `,"feature_control":{"ip_addrs_no_ipam":true}`, calicoIPAM)
		rt := podRuntime(t, "shop", "fixed")
		if ip := e.addOK(t, l, rt); ip != "192.0.2.55" {
			t.Errorf("ipAddrsNoIpam: got %s", ip)
		}
		if hs, err := ipam.New(e.cl).ListHandles(context.Background()); err != nil || len(hs) != 0 {
			t.Errorf("ipAddrsNoIpam allocated: %+v %v", hs, err)
		}
		e.delOK(t, l, rt)
	})

	t.Run("pod missing or API unreachable", func(t *testing.T) {
		e.t = t
		e.addFails(t, e.conflist(e.kubeconfig, "", calicoIPAM), podRuntime(t, "shop", "ghost"), "pod shop/ghost not found")
		e.addFails(t, e.conflist(e.kubeconfig, "", calicoIPAM), podRuntime(t, "nowhere", "web"), "pod nowhere/web not found")
		// The apiserver's own address is another namespace's loopback:
		// from the host namespace nothing listens there.
		unreachable := []string{"unreachable", "pod shop/web", e.api.URL}
		if kdd { // the first request is ClusterInformation's
			unreachable = []string{"error getting ClusterInformation", e.api.URL}
		}
		e.addFails(t, e.conflist(e.writeKubeconfig(t, e.api.URL), "", calicoIPAM), podRuntime(t, "shop", "web"), unreachable...)
		e.addFails(t, e.conflist(filepath.Join(t.TempDir(), "missing"), "", calicoIPAM), podRuntime(t, "shop", "web"),
			"kubernetes.kubeconfig", "missing")
	})

	t.Run("host-local usePodCidr", func(t *testing.T) {
		e.t = t
		referencePlugins(t, e.bin)
		podCIDR := map[string]any{"podCIDR": "10.123.4.0/24", "podCIDRs": []string{"10.123.4.0/24"}}
		if code, _ := e.api.Do(t, http.MethodGet, "/api/v1/nodes/node1", nil); code == http.StatusOK {
			// calico-node on the Kubernetes datastore registered on it
			e.do(t, http.MethodPatch, "/api/v1/nodes/node1", map[string]any{"spec": podCIDR}, http.StatusOK)
		} else {
			e.create(t, "/api/v1/nodes", map[string]any{"apiVersion": "v1", "kind": "Node",
				"metadata": map[string]any{"name": "node1"}, "spec": podCIDR})
		}
		dataDir := filepath.Join(e.state, "host-local")
		hostLocal := fmt.Sprintf(`{"type":"host-local","subnet":"usePodCidr","dataDir":%q}`, dataDir)
		l := e.conflist(e.kubeconfig, "", hostLocal)
		rt := podRuntime(t, "shop", "plain")
		ip := e.addOK(t, l, rt)
		if !strings.HasPrefix(ip, "10.123.4.") {
			t.Fatalf("usePodCidr: address %s, want one in the node's 10.123.4.0/24", ip)
		}
		if _, err := os.Stat(filepath.Join(dataDir, "k8s-pod-network", ip)); err != nil {
			t.Errorf("host-local reservation: %v", err)
		}
		// DEL needs no API (on etcd), and host-local releases by container.
		delConf := e.conflist(e.writeKubeconfig(t, e.api.URL), "", hostLocal)
		if kdd {
			delConf = l
		}
		e.delOK(t, delConf, rt)
		if _, err := os.Stat(filepath.Join(dataDir, "k8s-pod-network", ip)); !os.IsNotExist(err) {
			t.Errorf("host-local reservation after DEL: %v", err)
		}
	})
}

// podMAC is the MAC of eth0 in the pod namespace.
func podMAC(t *testing.T, path string) string {
	t.Helper()
	pod, err := ns.GetNS(path)
	if err != nil {
		t.Fatal(err)
	}
	defer pod.Close()
	var mac string
	err = pod.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName("eth0")
		if err == nil {
			mac = l.Attrs().HardwareAddr.String()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

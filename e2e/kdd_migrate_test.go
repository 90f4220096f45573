package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/apiconfig"
	"github.com/calico-aio/calico-aio/store/kdd/derive"
)

// migrateResources are the Calico resources of the etcd cluster that
// TestKDDMigrate moves: a pool, a tier with a global policy in it, a
// namespaced policy in the default tier, BGP configuration and a peer.
// Together: web takes TCP 8080 from anyone but app=other.
const migrateResources = `apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {name: pods}
spec: {cidr: 10.57.0.0/24, blockSize: 26, natOutgoing: true}
---
apiVersion: projectcalico.org/v3
kind: Tier
metadata: {name: security}
spec: {order: 100}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: security.no-other}
spec:
  tier: security
  order: 10
  selector: app == 'web'
  types: [Ingress]
  ingress: [{action: Deny, source: {selector: app == 'other'}}, {action: Pass}]
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: web-8080, namespace: shop}
spec:
  selector: app == 'web'
  types: [Ingress]
  ingress: [{action: Allow, protocol: TCP, destination: {ports: [8080]}}]
---
apiVersion: projectcalico.org/v3
kind: BGPConfiguration
metadata: {name: default}
spec: {asNumber: 64601, nodeToNodeMeshEnabled: false}
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: tor}
spec: {peerIP: 192.0.2.1, asNumber: 64602}
`

// migratePod is a pod of TestKDDMigrate: its network namespace and address.
type migratePod struct {
	name, app string
	ns        ns.NetNS
	addr      string
}

// TestKDDMigrate moves a running cluster from etcd to the Kubernetes
// datastore as Calico's documented procedure does: pods added by the CNI
// plugin in etcd mode (kubelet sets their status.podIPs), Calico policies
// in two tiers enforced by calico-node on etcd; lock, export, CRDs,
// import, calico-node and the netconf switched to kubernetes, unlock.
// Then the same pods keep their addresses with no new ADD, their routes
// (deleted while no agent ran) come back from the agent on Kubernetes, the
// same truth table holds, a new pod gets a fresh address from the
// migrated IPAM, and `calicoctl ipam check` on Kubernetes is clean.
func TestKDDMigrate(t *testing.T) {
	t.Parallel()
	e := newKubeCNIEnv(t, 197)
	e.kddNode(t, "node1")
	e.create(t, "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
	etcdEnv := []string{"DATASTORE_TYPE=etcdv3", "ETCD_ENDPOINTS=" + e.etcd.Endpoints()[0]}
	kubeEnv := []string{"DATASTORE_TYPE=kubernetes", "KUBECONFIG=" + e.kubeconfig, "ETCD_ENDPOINTS="}

	agent := e.startAgent("node1")
	e.ctlOK(t, etcdEnv, migrateResources, "apply", "-f", "-")
	calicoIPAM := `{"type":"calico-ipam"}`
	pods := []*migratePod{{name: "web", app: "web"}, {name: "client", app: "client"}, {name: "other", app: "other"}}
	for _, p := range pods {
		p.ns, p.addr = e.migratePodAdd(t, e.conflist(e.kubeconfig, "", calicoIPAM), p.name, p.app)
	}
	web, client, other := pods[0], pods[1], pods[2]
	listenPeer(t, web.ns, hostPort(web.addr, 8080))
	listenPeer(t, web.ns, hostPort(web.addr, 9090))
	truthTable := func(what string, extra ...probe) {
		t.Helper()
		expectTraffic(t, what, append([]probe{
			allow("client -> web:8080", tcpProbe(client.ns, hostPort(web.addr, 8080))),
			deny("client -> web:9090", tcpProbe(client.ns, hostPort(web.addr, 9090))),
			deny("other -> web:8080", tcpProbe(other.ns, hostPort(web.addr, 8080))),
		}, extra...)...)
	}
	truthTable("on etcd")

	// The documented steps: lock etcd, export, CRDs, import, unlock Kubernetes.
	e.ctlOK(t, etcdEnv, "", "datastore", "migrate", "lock")
	// Locked, the plugin takes no pod (its address would not be exported).
	e.createPodWith(t, "shop", "locked", "", nil, nil, nil)
	if _, err := e.add(e.conflist(e.kubeconfig, "", calicoIPAM), podRuntime(t, "shop", "locked")); err == nil || !strings.Contains(err.Error(), "Calico is currently not ready to process requests") {
		t.Errorf("ADD on the locked datastore: %v, want Calico's not-ready refusal", err)
	}
	export := e.ctlOK(t, etcdEnv, "", "datastore", "migrate", "export")
	e.api.InstallCRDs(t, kddCRDs)
	file := filepath.Join(t.TempDir(), "etcd-data")
	if err := os.WriteFile(file, []byte(export), 0o600); err != nil {
		t.Fatal(err)
	}
	e.ctlOK(t, kubeEnv, "", "datastore", "migrate", "import", "-f", file)

	// calico-node moves to Kubernetes. While none runs, the pods' routes
	// go: the agent on Kubernetes must put them back from the pods.
	agent.stop()
	for _, p := range pods {
		mustNS(t, e.host.ns, "ip", "route", "del", p.addr)
	}
	// Still locked (the import keeps datastoreReady false), the agent on
	// Kubernetes holds what it reads, as Calico's Felix: it is not ready
	// and puts no route back until the unlock.
	kddAgent := e.launchKDDAgent(t, e.host.ns, "node1", e.kubeconfig, e.state)
	eventually(t, 30*time.Second, "the agent on Kubernetes sees the lock", func() error {
		if !strings.Contains(kddAgent.logs.String(), "the datastore is locked") {
			return errors.New("no lock in its log")
		}
		return nil
	})
	if code, _ := httpGetIn(kddAgent.ns, "http://"+kddAgent.health+"/readiness"); code == 200 {
		t.Error("the agent is ready while the datastore is locked")
	}
	if out := mustNS(t, e.host.ns, "ip", "route", "show", pods[0].addr); out != "" {
		t.Errorf("while locked the agent put back the route of %s: %s", pods[0].name, out)
	}
	e.ctlOK(t, kubeEnv, "", "datastore", "migrate", "unlock")
	kddAgent.waitReady()
	e.ds = onKube // the netconf now says datastore_type kubernetes

	kcl, err := apiconfig.Open(&apiconfig.Config{Type: apiconfig.Kubernetes, Kube: apiconfig.Kube{Kubeconfig: e.api.KubeconfigPath}}, apiconfig.OSHost())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kcl.Close() })
	for _, p := range pods {
		r, err := kcl.GetResource(context.Background(), wepKindInfo(), "shop", derive.WorkloadEndpointName("node1", p.name, "eth0"))
		if err != nil || !slices.Equal(r.(*api.WorkloadEndpoint).Spec.IPNetworks, []string{p.addr + "/32"}) {
			t.Errorf("pod %s on Kubernetes: endpoint %+v %v, want address %s/32", p.name, r, err, p.addr)
		}
		e.waitRoute("the route of "+p.name+" on Kubernetes", p.addr, func(f []string) bool {
			return after(f, "dev") == derive.HostVethName("shop", p.name)
		})
	}
	if out := e.ctlOK(t, kubeEnv, "", "get", "bgpconfig", "default", "-o", "yaml"); !strings.Contains(out, "asNumber: 64601") {
		t.Errorf("BGPConfiguration on Kubernetes:\n%s", out)
	}

	// A new pod, added on Kubernetes, gets an address no pod holds.
	late := &migratePod{name: "late", app: "client"}
	late.ns, late.addr = e.migratePodAdd(t, e.conflist(e.kubeconfig, "", calicoIPAM), late.name, late.app)
	for _, p := range pods {
		if p.addr == late.addr {
			t.Errorf("the new pod got %s, which %s holds", late.addr, p.name)
		}
	}
	truthTable("on Kubernetes", allow("late -> web:8080", tcpProbe(late.ns, hostPort(web.addr, 8080))))
	if out := e.ctlOK(t, kubeEnv, "", "ipam", "check"); !strings.Contains(out, "found 0 problems") {
		t.Errorf("calicoctl ipam check on Kubernetes:\n%s", out)
	}
}

// migratePodAdd creates pod name (label app) and adds it with the CNI
// plugin in a new namespace, as kubelet would, then sets the pod's
// status.podIPs to its address, as kubelet does after the ADD. It returns
// the pod's namespace and address.
func (e *kubeCNIEnv) migratePodAdd(t *testing.T, l *libcni.NetworkConfigList, name, app string) (ns.NetNS, string) {
	t.Helper()
	e.createPodWith(t, "shop", name, "", map[string]string{"app": app}, nil, nil)
	n := newNS(t)
	addr := e.addOK(t, l, podRuntimeIn(n, "shop", name))
	e.do(t, http.MethodPatch, "/api/v1/namespaces/shop/pods/"+name+"/status",
		map[string]any{"status": map[string]any{"podIP": addr, "podIPs": []map[string]string{{"ip": addr}}}}, http.StatusOK)
	return n, addr
}

// ctlOK runs calicoctl in e's host namespace with env over the test's
// environment and stdin; it fails the test unless calicoctl succeeds, and
// returns its standard output.
func (e *kubeCNIEnv) ctlOK(t *testing.T, env []string, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"ctl"}, append(args, "--config", "")...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := e.inHost(cmd.Run); err != nil {
		t.Fatalf("calicoctl %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	if errb.Len() > 0 {
		t.Logf("calicoctl %s: %s", strings.Join(args, " "), errb.String())
	}
	return out.String()
}

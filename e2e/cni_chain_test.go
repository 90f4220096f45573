package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/store/api"
)

// listenTCP opens a TCP listener inside namespace n, closed when the test ends.
func listenTCP(t testing.TB, n ns.NetNS, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	mustDo(t, n, func() error {
		var err error
		l, err = net.Listen("tcp", addr)
		return err
	})
	t.Cleanup(func() { l.Close() })
	return l
}

// Chained with the reference portmap plugin, a host port reaches the pod.
func TestCNIChainedWithPortmap(t *testing.T) {
	t.Parallel()
	forEachCNIPath(t, testCNIChainedWithPortmap)
}

func testCNIChainedWithPortmap(t *testing.T, path cniPath) {
	e := newCNIEnv(t, 4)
	e.host.forwardingOn(t) // calico-node, when it runs, would turn it on
	e.servePath(path, "node1")
	if path == viaAgent {
		// calico-node enforces the network's profile, which admits only
		// its own members; this test is about the chain, so open it.
		k, _ := api.LookupKind("Profile")
		p := k.NewObject().(*api.Profile)
		p.Metadata.Name = "chain"
		p.Spec.Ingress = []api.Rule{{Action: api.ActionAllow}}
		p.Spec.Egress = []api.Rule{{Action: api.ActionAllow}}
		if _, err := e.cl.CreateResource(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	referencePlugins(t, e.bin)
	e.pool("v4", "10.104.0.0/24")
	l := e.conflist("1.0.0", "chain", e.calicoPlugin("node1", ""), `{"type":"portmap","capabilities":{"portMappings":true}}`)
	pod := newNS(t)
	rt := &libcni.RuntimeConf{ContainerID: "web", NetNS: pod.Path(), IfName: "eth0",
		CapabilityArgs: map[string]any{"portMappings": []map[string]any{{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}}}}
	res, err := e.add(l, rt)
	if err != nil {
		t.Fatalf("ADD through the chain: %v", err)
	}
	v4, _ := podAddrs(res)
	listenPeer(t, pod, ":80")
	mustNS(t, e.host.outside, "ip", "route", "add", "10.104.0.0/24", "via", e.host.hostIP)
	if err := tcpProbe(e.host.outside, v4+":80")(); err != nil {
		t.Errorf("outside -> pod directly: %v", err)
	}
	if err := tcpProbe(e.host.outside, e.host.hostIP+":8080")(); err != nil {
		t.Errorf("outside -> host port 8080 -> pod: %v", err)
	}
	if err := e.inHost(func() error { return e.cfg.CheckNetworkList(context.Background(), l, rt) }); err != nil {
		t.Errorf("CHECK through the chain: %v", err)
	}
	if err := e.del(l, rt); err != nil {
		t.Fatal(err)
	}
	if err := tcpProbe(e.host.outside, e.host.hostIP+":8080")(); err == nil {
		t.Errorf("host port still forwards after DEL")
	}
	e.assertClean()
}

// Any other IPAM type is delegated by exec, as the CNI spec says.
func TestCNIDelegatesToHostLocal(t *testing.T) {
	e := newCNIEnv(t, 5)
	referencePlugins(t, e.bin)
	plugin := fmt.Sprintf(`{"type":"calico","nodename":"node1","etcd_endpoints":%q,"calico_lib_dir":%q,"calico_run_dir":%q,
"ipam":{"type":"host-local","subnet":"10.105.0.0/24","dataDir":%q}}`, e.etcd.Endpoints()[0], e.state+"/lib", e.state+"/run", e.state+"/host-local")
	l := e.conflist("1.0.0", "hl", plugin)
	pod1, pod2 := newNS(t), newNS(t)
	rt1 := &libcni.RuntimeConf{ContainerID: "h1", NetNS: pod1.Path(), IfName: "eth0"}
	rt2 := &libcni.RuntimeConf{ContainerID: "h2", NetNS: pod2.Path(), IfName: "eth0"}
	r1, err := e.add(l, rt1)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := e.add(l, rt2)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := podAddrs(r1)
	b, _ := podAddrs(r2)
	if !strings.HasPrefix(a, "10.105.0.") || !strings.HasPrefix(b, "10.105.0.") {
		t.Fatalf("host-local addresses: %s %s", a, b)
	}
	eventually(t, 5*time.Second, "pod1 -> pod2", reachable(pod1, b))
	k, _ := api.LookupKind("WorkloadEndpoint")
	if _, err := e.cl.GetResource(context.Background(), k, "default", "node1-cni-h1-eth0"); err != nil {
		t.Errorf("endpoint: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.state, "host-local", "hl", a)); err != nil {
		t.Fatalf("host-local reservation of %s not where expected: %v", a, err)
	}
	for _, rt := range []*libcni.RuntimeConf{rt1, rt2} {
		if err := e.del(l, rt); err != nil {
			t.Fatal(err)
		}
	}
	// host-local released its addresses: no reservation files are left.
	for _, ip := range []string{a, b} {
		if _, err := os.Stat(filepath.Join(e.state, "host-local", "hl", ip)); !os.IsNotExist(err) {
			t.Errorf("host-local still reserves %s: %v", ip, err)
		}
	}
	e.assertClean()
}

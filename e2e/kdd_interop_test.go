package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/calico-aio/calico-aio/e2e/calicoipam"
)

// interopPod is one pod of the interop test and who networks it.
type interopPod struct {
	name, node string
	ours       bool // our plugin, else the calico-ipam double
	rt         *libcni.RuntimeConf
	addr       netip.Addr
}

// TestKDDInterop: on the Kubernetes datastore, 20 pods on two nodes (two
// CNI hosts), half added by our plugin and half by the double of real
// calico-ipam (e2e/calicoipam, the recorded protocol) against the same
// custom resources, interleaved: no address is held twice at any point;
// after every pod is released, interleaved too, our calicoctl's
// `ipam check` on the Kubernetes datastore finds nothing wrong and the
// double's audit agrees.
func TestKDDInterop(t *testing.T) {
	t.Parallel()
	e1 := newKubeCNIEnvOn(t, 252, onKube)
	e2 := e1.secondHost(t, 253, "node2")
	ctx := context.Background()
	e1.pool("default-ipv4-ippool", "10.244.0.0/16")
	e1.create(t, "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
	for _, n := range []string{"node1", "node2"} {
		e1.create(t, "/api/v1/nodes", map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": n}})
	}
	d := calicoipam.New(calicoipam.Conn{URL: e1.api.URL, Token: e1.api.Token, Client: e1.api.HTTPClient()})

	var pods []*interopPod
	for i := range 20 {
		p := &interopPod{name: fmt.Sprintf("p%02d", i), node: []string{"node1", "node2"}[i%2], ours: i%4 < 2}
		e1.createPodOn(t, p.node, "shop", p.name)
		pods = append(pods, p)
	}
	held := map[netip.Addr]string{}
	for _, p := range pods {
		e := map[string]*kubeCNIEnv{"node1": e1, "node2": e2}[p.node]
		if p.ours {
			p.rt = podRuntime(t, "shop", p.name)
			p.addr = netip.MustParseAddr(e.addOK(t, e.conflist(e.kubeconfig, "", `{"type":"calico-ipam"}`), p.rt))
		} else {
			a, err := d.Assign(ctx, calicoipam.Pod{Node: p.node, Namespace: "shop", Name: p.name, ContainerID: "double-" + p.name})
			if err != nil {
				t.Fatalf("double's ADD of %s: %v", p.name, err)
			}
			p.addr = a
		}
		if other, dup := held[p.addr]; dup {
			t.Errorf("%s got %s, which %s holds", p.name, p.addr, other)
		}
		held[p.addr] = p.name
		e.wantPodAddress(t, &libcni.RuntimeConf{ContainerID: containerOf(p)}, "shop", p.name, p.addr.String())
	}
	checkAudit(t, d, 20)
	for _, p := range pods {
		e := map[string]*kubeCNIEnv{"node1": e1, "node2": e2}[p.node]
		if p.ours {
			if err := e.del(e.conflist(e.kubeconfig, "", `{"type":"calico-ipam"}`), p.rt); err != nil {
				t.Errorf("DEL %s: %v", p.name, err)
			}
		} else if err := d.Release(ctx, calicoipam.Pod{Node: p.node, Namespace: "shop", Name: p.name, ContainerID: "double-" + p.name}); err != nil {
			t.Errorf("double's DEL of %s: %v", p.name, err)
		}
	}
	checkAudit(t, d, 0)
	e1.assertClean()
	e2.assertClean()
	out, stderr, err := runBinEnv(t, []string{"DATASTORE_TYPE=kubernetes", "KUBECONFIG=" + e1.api.KubeconfigPath}, "ctl", "ipam", "check", "--config", "")
	if err != nil || !strings.Contains(out, "found 0 problems") {
		t.Errorf("calicoctl ipam check: %v\n%s%s", err, out, stderr)
	}
}

// containerOf is the container ID a pod was added with.
func containerOf(p *interopPod) string {
	if p.ours {
		return p.rt.ContainerID
	}
	return "double-" + p.name
}

// checkAudit fails unless the double's audit finds n allocations and no problem.
func checkAudit(t *testing.T, d *calicoipam.Double, n int) {
	t.Helper()
	a, err := d.Audit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Allocations) != n || len(a.Problems) != 0 {
		t.Errorf("audit: %d allocations (want %d), problems %v", len(a.Allocations), n, a.Problems)
	}
}

// secondHost is another CNI host on e's apiserver and datastore, its
// plugin's nodename node.
func (e *kubeCNIEnv) secondHost(t *testing.T, hostIndex int, node string) *kubeCNIEnv {
	c := &cniEnv{t: t, host: newTestHost(t, hostIndex), bin: e.bin, cache: t.TempDir(), state: t.TempDir(), cl: e.cl}
	c.cfg = libcni.NewCNIConfigWithCacheDir([]string{c.bin}, c.cache, nil)
	e2 := &kubeCNIEnv{cniEnv: c, api: e.api, ds: e.ds, node: node}
	e2.kubeconfig = e2.writeKubeconfig(t, "https://"+e2.relay(t, strings.TrimPrefix(e.api.URL, "https://")))
	return e2
}

// createPodOn creates a pod bound to node.
func (e *kubeCNIEnv) createPodOn(t testing.TB, node, namespace, name string) {
	t.Helper()
	e.create(t, "/api/v1/namespaces/"+namespace+"/pods", map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"nodeName": node, "containers": []map[string]any{{"name": "app", "image": "registry.k8s.io/pause:3.10"}}}})
}

// runBinEnv runs the binary with env added to the test's environment.
func runBinEnv(t *testing.T, env []string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

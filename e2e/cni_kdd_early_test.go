package e2e

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/vishvananda/netlink"
)

// TestCNIEarlyEndpointWrite: on Kubernetes an ADD patches its pod while the
// veth is being set up (cni/kdd_early.go). An ADD whose wiring fails takes
// the patch back: the pod is left as a DEL leaves it (the containerID
// annotation the early write set, no address), with nothing allocated. On
// both datastores, a repeated ADD that finds its endpoint but not its veth
// (an ADD cut short after the endpoint was written) wires the pod again,
// with the same address.
func TestCNIEarlyEndpointWrite(t *testing.T) {
	forEachDatastore(t, map[datastore]int{onEtcd: 240, onKube: 241}, func(t *testing.T, e *kubeCNIEnv) {
		e.pool("default-ipv4-ippool", "10.244.0.0/16")
		e.create(t, "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
		for _, pod := range []string{"web-1", "web-2"} {
			e.createPod(t, "shop", pod, "", nil, nil)
		}
		l := e.conflist(e.kubeconfig, "", `{"type":"calico-ipam"}`)

		bad := podRuntime(t, "shop", "web-1")
		bad.NetNS = filepath.Join(t.TempDir(), "gone")
		e.addFails(t, l, bad, "network namespace")
		e.wantPodCleared(t, bad, "shop", "web-1")

		rt := podRuntime(t, "shop", "web-2")
		ip := e.addOK(t, l, rt)
		links := e.hostLinks()
		if len(links) != 1 {
			t.Fatalf("host links %v, want the pod's", links)
		}
		if err := e.inHost(func() error { return netlink.LinkDel(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: links[0]}}) }); err != nil {
			t.Fatal(err)
		}
		if again := e.addOK(t, l, rt); again != ip {
			t.Errorf("repeated ADD gave %s, want the endpoint's %s", again, ip)
		}
		if err := e.inHost(func() error { return e.cfg.CheckNetworkList(context.Background(), l, rt) }); err != nil {
			t.Errorf("CHECK after the repeated ADD: %v", err)
		}
		e.wantPodAddress(t, rt, "shop", "web-2", ip)
		if err := e.del(l, rt); err != nil {
			t.Fatalf("DEL: %v", err)
		}
		e.assertClean()
	})
}

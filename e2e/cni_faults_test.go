package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/calico-aio/calico-aio/ipam"
)

// ipamCheckClean runs the real calicoctl ipam check from the host namespace.
func (e *cniEnv) ipamCheckClean() {
	e.t.Helper()
	out, err := inNS(e.host.ns, binary, "ctl", "ipam", "check", "--etcd-endpoints", e.etcd.Endpoints()[0], "--config", "")
	if err != nil {
		e.t.Fatalf("ipam check: %v", err)
	}
	if !strings.Contains(out, "Check complete; found 0 problems.") {
		e.t.Errorf("ipam check found problems:\n%s", out)
	}
}

func TestCNIFaults(t *testing.T) { forEachCNIPath(t, testCNIFaults) }

func testCNIFaults(t *testing.T, path cniPath) {
	e := newCNIEnv(t, 3)
	createPool(t, e.cl, "small", "10.102.0.0/30", 30)
	if path == inProcess {
		createNode(t, e.cl, "node1")
	}
	e.servePath(path, "node1") // registers node1 itself
	l := e.conflist("1.1.0", "faults", e.calicoPlugin("node1", `,"ipv4_pools":["small"]`))
	ctx := context.Background()
	handles := func() int {
		hs, err := ipam.New(e.cl).ListHandles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(hs)
	}

	t.Run("netns missing", func(t *testing.T) {
		_, err := e.add(l, &libcni.RuntimeConf{ContainerID: "nons", NetNS: "/var/run/netns/does-not-exist", IfName: "eth0"})
		if err == nil || !strings.Contains(err.Error(), "does-not-exist") {
			t.Fatalf("ADD into a missing netns: %v", err)
		}
		if n := handles(); n != 0 {
			t.Errorf("%d handles left", n)
		}
		if l := e.hostLinks(); len(l) != 0 {
			t.Errorf("links left: %v", l)
		}
	})

	t.Run("interface name taken", func(t *testing.T) {
		pod := newNS(t)
		mustNS(t, pod, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "other")
		_, err := e.add(l, &libcni.RuntimeConf{ContainerID: "taken", NetNS: pod.Path(), IfName: "eth0"})
		if err == nil || !strings.Contains(err.Error(), `interface "eth0" already exists`) {
			t.Fatalf("ADD with eth0 taken: %v", err)
		}
		if n := handles(); n != 0 {
			t.Errorf("%d handles left", n)
		}
		if l := e.hostLinks(); len(l) != 0 {
			t.Errorf("links left: %v", l)
		}
	})

	t.Run("host route taken", func(t *testing.T) {
		mustNS(t, e.host.ns, "ip", "route", "add", "10.102.0.3/32", "dev", "uplink")
		defer mustNS(t, e.host.ns, "ip", "route", "del", "10.102.0.3/32", "dev", "uplink")
		pod := newNS(t)
		_, err := e.add(l, &libcni.RuntimeConf{ContainerID: "route", NetNS: pod.Path(), IfName: "eth0", Args: [][2]string{{"IP", "10.102.0.3"}}})
		if err == nil || !strings.Contains(err.Error(), "10.102.0.3 already exists via interface uplink") {
			t.Fatalf("ADD onto a taken route: %v", err)
		}
		if n := handles(); n != 0 {
			t.Errorf("%d handles left", n)
		}
		if l := e.hostLinks(); len(l) != 0 { // the pair was made while the address was allocated
			t.Errorf("links left: %v", l)
		}
	})

	t.Run("ipam exhausted", func(t *testing.T) {
		var rts []*libcni.RuntimeConf
		for i := 0; i < 4; i++ {
			rt := &libcni.RuntimeConf{ContainerID: "full" + string(rune('a'+i)), NetNS: newNS(t).Path(), IfName: "eth0"}
			if _, err := e.add(l, rt); err != nil {
				t.Fatal(err)
			}
			rts = append(rts, rt)
		}
		_, err := e.add(l, &libcni.RuntimeConf{ContainerID: "over", NetNS: newNS(t).Path(), IfName: "eth0"})
		if err == nil || !strings.Contains(err.Error(), "small (10.102.0.0/30)") {
			t.Fatalf("ADD into a full pool: %v", err)
		}
		if got := len(e.hostLinks()); got != 4 { // the fifth pod's pair, made meanwhile, removed
			t.Errorf("%d host links, want the 4 pods", got)
		}
		for _, rt := range rts {
			if err := e.del(l, rt); err != nil {
				t.Fatal(err)
			}
		}
		e.assertClean()
	})

	t.Run("datastore down during ADD", func(t *testing.T) {
		e.etcd.Stop()
		defer e.etcd.Restart(t)
		_, err := e.add(l, &libcni.RuntimeConf{ContainerID: "down", NetNS: newNS(t).Path(), IfName: "eth0"})
		if err == nil || !strings.Contains(err.Error(), "datastore") {
			t.Fatalf("ADD with etcd down: %v", err)
		}
		if l := e.hostLinks(); len(l) != 0 {
			t.Errorf("links left: %v", l)
		}
	})

	t.Run("datastore down during DEL", func(t *testing.T) {
		rt := &libcni.RuntimeConf{ContainerID: "deldown", NetNS: newNS(t).Path(), IfName: "eth0"}
		if _, err := e.add(l, rt); err != nil {
			t.Fatal(err)
		}
		e.etcd.Stop()
		err := e.del(l, rt)
		e.etcd.Restart(t)
		if err != nil {
			t.Fatalf("DEL with etcd down: %v", err)
		}
		if l := e.hostLinks(); len(l) != 0 {
			t.Errorf("veth not removed while etcd was down: %v", l)
		}
		journal, _ := filepath.Glob(filepath.Join(e.state, "lib", "pending-releases", "*"))
		if len(journal) != 1 {
			t.Fatalf("journal = %v, want one pending delete", journal)
		}
		// The next CNI call replays the journal.
		next := &libcni.RuntimeConf{ContainerID: "next", NetNS: newNS(t).Path(), IfName: "eth0"}
		if _, err := e.add(l, next); err != nil {
			t.Fatal(err)
		}
		if err := e.del(l, next); err != nil {
			t.Fatal(err)
		}
		if journal, _ := filepath.Glob(filepath.Join(e.state, "lib", "pending-releases", "*")); len(journal) != 0 {
			t.Errorf("journal not replayed: %v", journal)
		}
		e.assertClean()
		e.ipamCheckClean()
	})

	t.Run("crash between allocation and endpoint write", func(t *testing.T) {
		rt := &libcni.RuntimeConf{ContainerID: "crash", NetNS: newNS(t).Path(), IfName: "eth0"}
		t.Setenv("CALICO_CNI_FAULT", "after-ipam")
		if _, err := e.add(l, rt); err == nil {
			t.Fatal("ADD survived its crash")
		}
		os.Unsetenv("CALICO_CNI_FAULT")
		if n := handles(); n != 1 {
			t.Fatalf("after the crash %d handles, want the 1 allocated", n)
		}
		// The runtime cleans a failed sandbox up with DEL.
		if err := e.del(l, rt); err != nil {
			t.Fatal(err)
		}
		e.assertClean()
		e.ipamCheckClean()
	})
}

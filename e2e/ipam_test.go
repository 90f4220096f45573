package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

func createPool(t testing.TB, c *store.Client, name, cidr string, blockSize int) {
	t.Helper()
	k, _ := api.LookupKind("IPPool")
	p := k.NewObject().(*api.IPPool)
	p.Metadata.Name, p.Spec.CIDR, p.Spec.BlockSize = name, cidr, blockSize
	if _, err := c.CreateResource(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// createNode registers a Node as calico-node would.
func createNode(t testing.TB, c *store.Client, name string) {
	t.Helper()
	k, _ := api.LookupKind("Node")
	n := k.NewObject()
	n.GetObjectMeta().Name = name
	if _, err := c.CreateResource(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

func TestIPAMPluginVerbs(t *testing.T) {
	e := storetest.StartEtcd(t)
	c := e.Client(t)
	createPool(t, c, "p4", "10.90.0.0/24", 26)
	createPool(t, c, "p6", "fd00:90::/64", 122)
	dir := t.TempDir()
	ep := e.Endpoints()[0]
	for _, v := range []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			conf := ipamConf(v, "net"+strings.ReplaceAll(v, ".", ""), "node1", ep, dir, `,"assign_ipv6":"true"`)
			call := cniCall{Plugin: "calico-ipam", ContainerID: "ctr1", Conf: conf}
			call.Command = "ADD"
			r := runCNI(call)
			if r.Err != nil {
				t.Fatalf("ADD: %v %s %s", r.Err, r.Stdout, r.Stderr)
			}
			ips := r.ips(t)
			if len(ips) != 2 || !strings.HasSuffix(ips[0], "/26") || !strings.HasSuffix(ips[1], "/122") {
				t.Fatalf("ADD result IPs %v", ips)
			}
			if !strings.Contains(r.Stdout, `"cniVersion": "`+v+`"`) {
				t.Errorf("result not in version %s: %s", v, r.Stdout)
			}
			again := runCNI(call)
			if again.Err != nil || strings.Join(again.ips(t), ",") != strings.Join(ips, ",") {
				t.Errorf("repeated ADD: %v %v", again.ips(t), again.Err)
			}
			if v >= "0.4.0" {
				call.Command = "CHECK"
				if r := runCNI(call); r.Err != nil {
					t.Errorf("CHECK: %s", r.Stdout)
				}
			}
			call.Command = "DEL"
			for i := 0; i < 2; i++ {
				if r := runCNI(call); r.Err != nil {
					t.Errorf("DEL #%d: %v %s", i+1, r.Err, r.Stdout)
				}
			}
			if v >= "0.4.0" {
				call.Command = "CHECK"
				if r := runCNI(call); r.Err == nil {
					t.Errorf("CHECK after DEL succeeded")
				}
			}
		})
	}
	if hs, _ := ipam.New(c).ListHandles(context.Background()); len(hs) != 0 {
		t.Errorf("handles left: %+v", hs)
	}
}

func TestIPAMPluginErrors(t *testing.T) {
	e := storetest.StartEtcd(t)
	c := e.Client(t)
	dir := t.TempDir()
	ep := e.Endpoints()[0]
	conf := ipamConf("1.1.0", "net", "node1", ep, dir, "")
	// No pool at all: STATUS says not available (50), ADD names the problem.
	if r := runCNI(cniCall{Plugin: "calico-ipam", Command: "STATUS", Conf: conf}); r.errorCode() != 50 {
		t.Errorf("STATUS without pools: code %d, %s", r.errorCode(), r.Stdout)
	}
	createPool(t, c, "tiny", "10.91.0.0/30", 30)
	if r := runCNI(cniCall{Plugin: "calico-ipam", Command: "STATUS", Conf: conf}); r.Err != nil {
		t.Errorf("STATUS with a pool: %s", r.Stdout)
	}
	for i := 0; i < 4; i++ {
		if r := runCNI(cniCall{Plugin: "calico-ipam", Command: "ADD", ContainerID: "c" + string(rune('0'+i)), Conf: conf}); r.Err != nil {
			t.Fatalf("ADD %d: %s", i, r.Stdout)
		}
	}
	r := runCNI(cniCall{Plugin: "calico-ipam", Command: "ADD", ContainerID: "full", Conf: conf})
	if r.Err == nil || !strings.Contains(r.Stdout, "10.91.0.0/30") {
		t.Errorf("exhausted pool: %s", r.Stdout)
	}
	// A taken address, an address outside every pool, an unknown pool.
	r = runCNI(cniCall{Plugin: "calico-ipam", Command: "ADD", ContainerID: "x", Args: "IP=10.91.0.1", Conf: conf})
	if r.Err == nil || !strings.Contains(r.Stdout, "10.91.0.1 is already in use") {
		t.Errorf("taken IP: %s", r.Stdout)
	}
	r = runCNI(cniCall{Plugin: "calico-ipam", Command: "ADD", ContainerID: "x", Args: "IP=192.0.2.9", Conf: conf})
	if r.Err == nil || !strings.Contains(r.Stdout, "192.0.2.9 is not in any enabled IP pool") {
		t.Errorf("IP outside pools: %s", r.Stdout)
	}
	r = runCNI(cniCall{Plugin: "calico-ipam", Command: "ADD", ContainerID: "x", Conf: ipamConf("1.1.0", "net", "node1", ep, dir, `,"ipv4_pools":["nosuch"]`)})
	if r.Err == nil || r.errorCode() != 7 || !strings.Contains(r.Stdout, `nosuch`) {
		t.Errorf("unknown pool: %s", r.Stdout)
	}
	if hs, _ := ipam.New(c).ListHandles(context.Background()); len(hs) != 4 {
		t.Errorf("failed ADDs left handles: %d, want the 4 live ones", len(hs))
	}
	// GC keeps the valid attachments, releases the rest.
	gcConf := strings.Replace(conf, `"ipam"`, `"cni.dev/valid-attachments":[{"containerID":"c0","ifname":"eth0"}],"ipam"`, 1)
	if r := runCNI(cniCall{Plugin: "calico-ipam", Command: "GC", Conf: gcConf}); r.Err != nil {
		t.Fatalf("GC: %s %s", r.Stdout, r.Stderr)
	}
	hs, _ := ipam.New(c).ListHandles(context.Background())
	if len(hs) != 1 || hs[0].ID != "net.c0" {
		t.Errorf("after GC handles = %+v, want only net.c0", hs)
	}
}

// With the datastore gone, DEL journals the release and succeeds; the next
// call replays it.
func TestIPAMDelJournalsWhenDatastoreDown(t *testing.T) {
	t.Parallel()
	e := storetest.StartEtcd(t)
	c := e.Client(t)
	createPool(t, c, "p", "10.92.0.0/24", 26)
	dir := t.TempDir()
	conf := ipamConf("1.1.0", "net", "node1", e.Endpoints()[0], dir, "")
	if r := runCNI(cniCall{Plugin: "calico-ipam", Command: "ADD", ContainerID: "a", Conf: conf}); r.Err != nil {
		t.Fatal(r.Stdout)
	}
	e.Stop()
	if r := runCNI(cniCall{Plugin: "calico-ipam", Command: "DEL", ContainerID: "a", Conf: conf}); r.Err != nil {
		t.Fatalf("DEL with etcd down: %s %s", r.Stdout, r.Stderr)
	}
	e.Restart(t)
	if hs, _ := ipam.New(c).ListHandles(context.Background()); len(hs) != 1 {
		t.Fatalf("handle released while etcd was down?")
	}
	if r := runCNI(cniCall{Plugin: "calico-ipam", Command: "ADD", ContainerID: "b", Conf: conf}); r.Err != nil {
		t.Fatal(r.Stdout)
	}
	hs, _ := ipam.New(c).ListHandles(context.Background())
	if len(hs) != 1 || hs[0].ID != "net.b" {
		t.Errorf("after replay handles = %+v, want only net.b", hs)
	}
}

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/vishvananda/netlink"
)

// TestCNINetconfKeys runs the built plugin in-process (no agent) with
// Calico's netconf keys that act outside the datastore: require_mtu_file
// fails the ADD (leaving nothing) until the MTU file exists;
// readiness_gates are polled before anything is set up; ipam_lock_file is
// the lock taken; log_file_path receives the plugin's log at log_level
// debug; num_queues gives the veth that many queues.
func TestCNINetconfKeys(t *testing.T) {
	t.Parallel()
	e := newCNIEnv(t, 245)
	e.pool("v4", "10.245.0.0/24")
	var gateCalls atomic.Int32
	gate := listenTCP(t, e.host.ns, "127.0.0.1:0")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { gateCalls.Add(1) })}
	go func() { _ = srv.Serve(gate) }()
	t.Cleanup(func() { _ = srv.Close() })
	lock, logFile := filepath.Join(e.state, "locks", "calico-ipam.lock"), filepath.Join(e.state, "log", "cni.log")
	plugin := fmt.Sprintf(`{"type":"calico","nodename":"node1","etcd_endpoints":%q,"calico_lib_dir":%q,"calico_run_dir":%q,
"log_level":"debug","require_mtu_file":true,"readiness_gates":["http://%s/ready"],"ipam_lock_file":%q,"log_file_path":%q,"num_queues":3,
"ipam":{"type":"calico-ipam"}}`, e.etcd.Endpoints()[0], e.state+"/lib", e.state+"/run", gate.Addr(), lock, logFile)
	l := e.conflist("1.0.0", "net1", plugin)
	n := newNS(t)
	rt := &libcni.RuntimeConf{ContainerID: "keys", NetNS: n.Path(), IfName: "eth0"}

	if _, err := e.add(l, rt); err == nil || !strings.Contains(err.Error(), "MTU file") {
		t.Fatalf("ADD without the MTU file: %v, want require_mtu_file's error", err)
	}
	e.assertClean()
	if err := os.MkdirAll(e.state+"/lib", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.state+"/lib/mtu", []byte("1400"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := e.add(l, rt)
	if err != nil {
		t.Fatal(err)
	}
	if gateCalls.Load() == 0 {
		t.Errorf("the readiness gate was never polled")
	}
	if _, err := os.Stat(lock); err != nil {
		t.Errorf("ipam_lock_file: %v", err)
	}
	if b, err := os.ReadFile(logFile); err != nil || !strings.Contains(string(b), "pod network set up") {
		t.Errorf("log_file_path holds %q (%v), want the ADD's log", b, err)
	}
	host := res.Interfaces[0].Name
	mustDo(t, e.host.ns, func() error {
		link, err := netlink.LinkByName(host)
		if err != nil {
			return err
		}
		if a := link.Attrs(); a.NumTxQueues != 3 || a.NumRxQueues != 3 || a.MTU != 1400 {
			t.Errorf("host veth %s: %d/%d queues, MTU %d; want 3/3 and the MTU file's 1400", host, a.NumTxQueues, a.NumRxQueues, a.MTU)
		}
		return nil
	})
	if err := e.del(l, rt); err != nil {
		t.Fatal(err)
	}
	e.assertClean()
}

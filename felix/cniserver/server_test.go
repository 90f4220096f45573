package cniserver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/cni"
	"github.com/calico-aio/calico-aio/cni/fastpath"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/apiconfig"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// The agent serves calico-ipam calls over its socket with the same code as
// the in-process plugin (no kernel state is touched by IPAM), and answers
// "not mine" for what it cannot serve exactly as the plugin would.
func TestCNIServerServesIPAMAndRefusesOthers(t *testing.T) {
	etcd := storetest.StartEtcd(t)
	c := etcd.Client(t)
	ctx := context.Background()
	k, _ := api.LookupKind("IPPool")
	pool := k.NewObject().(*api.IPPool)
	pool.Metadata.Name, pool.Spec.CIDR = "p1", "10.77.0.0/24"
	if _, err := c.CreateResource(ctx, pool); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	sock := filepath.Join(run, fastpath.SocketName)
	s, err := listenCNI(sock, &cni.Agent{Client: c, Node: "n1", Datastore: &apiconfig.Config{Type: apiconfig.EtcdV3, Etcd: store.Config{Endpoints: etcd.Endpoints()}}})
	if err != nil {
		t.Fatal(err)
	}
	go s.run(ctx)
	t.Cleanup(s.close)
	if st, err := os.Stat(sock); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket %s: mode %v, err %v; want 0600", sock, st.Mode().Perm(), err)
	}

	conf := func(node, endpoint, ipamType string) []byte {
		return []byte(`{"cniVersion":"1.0.0","name":"net1","type":"calico","nodename":"` + node + `","etcd_endpoints":"` + endpoint +
			`","calico_lib_dir":"` + dir + `/lib","calico_run_dir":"` + run + `","ipam":{"type":"` + ipamType + `"}}`)
	}
	env := func(cmd string) []string {
		return []string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=c1", "CNI_NETNS=/var/run/netns/x", "CNI_IFNAME=eth0",
			"CNI_PATH=/opt/cni/bin", "CNI_NETNS_OVERRIDE=1"}
	}
	call := func(plugin, cmd string, stdin []byte) fastpath.Reply {
		t.Helper()
		rep, ok := fastpath.Forward(sock, fastpath.Request{Plugin: plugin, Env: env(cmd), Stdin: stdin})
		if !ok {
			t.Fatalf("%s %s: no reply", plugin, cmd)
		}
		return rep
	}
	good := conf("n1", etcd.Endpoints()[0], "calico-ipam")
	if got := fastpath.SocketPath(good); got != sock {
		t.Fatalf("SocketPath = %s, want %s", got, sock)
	}

	rep := call("calico-ipam", "ADD", good)
	if !rep.Mine || rep.Exit != 0 {
		t.Fatalf("ADD: %+v (%s)", rep, rep.Stdout)
	}
	var res struct {
		IPs []struct{ Address string } `json:"ips"`
	}
	if err := json.Unmarshal(rep.Stdout, &res); err != nil || len(res.IPs) != 1 || !strings.HasPrefix(res.IPs[0].Address, "10.77.0.") {
		t.Fatalf("ADD result %s: %v", rep.Stdout, err)
	}
	al := ipam.New(c)
	if ips, err := al.IPsByHandle(ctx, "net1.c1"); err != nil || len(ips) != 1 {
		t.Fatalf("handle net1.c1 holds %v (%v), want one address", ips, err)
	}
	if rep := call("calico-ipam", "CHECK", good); !rep.Mine || rep.Exit != 0 {
		t.Fatalf("CHECK: %+v (%s)", rep, rep.Stdout)
	}
	if rep := call("calico-ipam", "DEL", good); !rep.Mine || rep.Exit != 0 {
		t.Fatalf("DEL: %+v (%s)", rep, rep.Stdout)
	}
	if ips, _ := al.IPsByHandle(ctx, "net1.c1"); len(ips) != 0 {
		t.Fatalf("DEL left %v", ips)
	}
	// A CNI error is the plugin's: printed as JSON with exit code 1.
	if rep := call("calico-ipam", "CHECK", good); !rep.Mine || rep.Exit != 1 || !strings.Contains(string(rep.Stdout), `"code": 3`) {
		t.Fatalf("CHECK of a released container: %+v (%s), want CNI error 3", rep, rep.Stdout)
	}

	for name, tc := range map[string]struct {
		plugin, cmd string
		stdin       []byte
		reason      string
	}{
		"other node":      {"calico-ipam", "ADD", conf("n2", etcd.Endpoints()[0], "calico-ipam"), "node name"},
		"other datastore": {"calico-ipam", "ADD", conf("n1", "http://127.0.0.1:1", "calico-ipam"), "datastore"},
		"delegated IPAM":  {"calico", "ADD", conf("n1", etcd.Endpoints()[0], "host-local"), "delegated"},
		"invalid netconf": {"calico-ipam", "ADD", []byte(`{"name":"x","cniVersion":"1.0.0","mtu":"big"}`), "netconf"},
		"VERSION":         {"calico", "VERSION", good, "not served"},
		"old cniVersion":  {"calico-ipam", "STATUS", []byte(strings.Replace(string(good), "1.0.0", "0.4.0", 1)), "does not allow"},
		"unknown argv[0]": {"ptp", "ADD", good, "not served"},
	} {
		rep := call(tc.plugin, tc.cmd, tc.stdin)
		if rep.Mine || !strings.Contains(rep.Reason, tc.reason) {
			t.Errorf("%s: %+v, want not mine because of %q", name, rep, tc.reason)
		}
	}
	if ips, _ := al.IPsByHandle(ctx, "net1.c1"); len(ips) != 0 {
		t.Fatalf("refused calls allocated %v", ips)
	}
}

// A socket nobody serves, or one that closes without a reply, is "no
// answer": the client falls back to the in-process plugin.
func TestCNIForwardWithoutAgent(t *testing.T) {
	sock := filepath.Join(t.TempDir(), fastpath.SocketName)
	if _, ok := fastpath.Forward(sock, fastpath.Request{Plugin: "calico"}); ok {
		t.Fatal("Forward to a missing socket succeeded")
	}
	s, err := listenCNI(sock, &cni.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { // accept and drop, as an agent killed mid-call does
		conn, err := s.ln.AcceptUnix()
		if err == nil {
			conn.Close()
		}
	}()
	defer s.close()
	if _, ok := fastpath.Forward(sock, fastpath.Request{Plugin: "calico"}); ok {
		t.Fatal("Forward over a dropped connection succeeded")
	}
}

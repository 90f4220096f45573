package e2e

import (
	"errors"
	"os/exec"

	"github.com/containernetworking/plugins/pkg/ns"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/embedded"
)

// The main job at the foundation stage: calico-node with no etcd configured
// runs the embedded datastore, calicoctl talks to it, and SIGTERM stops it.
func TestNodeEmbeddedEtcdServesCalicoctl(t *testing.T) {
	t.Parallel()
	client, err := embedded.FreeLoopbackURL()
	if err != nil {
		t.Fatal(err)
	}
	peer, err := embedded.FreeLoopbackURL()
	if err != nil {
		t.Fatal(err)
	}
	// The agent programs iptables and routes: it runs in a namespace of
	// its own, never in the host's. calicoctl reaches its loopback etcd
	// from the same namespace.
	host := newNS(t)
	state := t.TempDir()
	node := exec.Command(binary, "node", "--nodename", "e2e-node", "--etcd-data-dir", t.TempDir(),
		"--etcd-client-url", client, "--etcd-peer-url", peer, "--lib-dir", state+"/lib", "--run-dir", state+"/run",
		"--bgp=false", "--health-addr", "", "--metrics-addr", "", "--ip", "none")
	var logs strings.Builder
	node.Stdout, node.Stderr = &logs, &logs
	exited, err := startIn(host, node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = node.Process.Kill()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
	})

	ctl := func(stdin string, args ...string) (string, string, error) {
		var out, errs string
		err := host.Do(func(ns.NetNS) error {
			var err error
			out, errs, err = runBin(t, stdin, append(append([]string{"ctl"}, args...), "--etcd-endpoints", client, "--config", "")...)
			return err
		})
		return out, errs, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _, err := ctl("", "get", "clusterinformation", "default", "-o", "yaml")
		if err == nil && strings.Contains(out, "datastoreReady: true") && strings.Contains(out, "clusterGUID:") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("calicoctl never reached the embedded etcd: %v\n%s\nnode log:\n%s", err, out, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	pool := "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: p}\nspec: {cidr: 10.9.0.0/16}\n"
	if out, errs, err := ctl(pool, "apply", "-f", "-"); err != nil || !strings.Contains(out, "Successfully applied 1 'IPPool' resource(s)") {
		t.Fatalf("apply: %v %s %s", err, out, errs)
	}
	// A typo is refused as real calicoctl refuses it, exit 1, nothing
	// stored (issue #22).
	typo := "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: q}\nspec: {cidr: 10.8.0.0/16, natOutgoin: true}\n"
	var exit *exec.ExitError
	if out, errs, err := ctl(typo, "apply", "-f", "-"); !errors.As(err, &exit) || exit.ExitCode() != 1 ||
		errs != "field in document is not recognized or is in the wrong location: natOutgoin\n" {
		t.Fatalf("apply with a typo: %v %q %q", err, out, errs)
	}
	out, errs, err := ctl("", "get", "ippools")
	if err != nil || !strings.Contains(out, "10.9.0.0/16") || strings.Contains(out, "10.8.0.0/16") {
		t.Fatalf("get: %v %q %s", err, out, errs)
	}
	if err := node.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("calico-node exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("calico-node did not stop on SIGTERM\n%s", logs.String())
	}
}

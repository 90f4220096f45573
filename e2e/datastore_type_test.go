package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// calico-node reads DATASTORE_TYPE as Calico does. Started with Calico's
// stock DaemonSet environment (DATASTORE_TYPE=kubernetes, no
// ETCD_ENDPOINTS), or in a pod with no etcd configured, it exits non-zero
// with a clear message and starts no embedded etcd of its own.
func TestNodeDatastoreTypeRefused(t *testing.T) {
	needRoot(t)
	t.Parallel()
	n := newNS(t) // should the agent not exit, it programs only this namespace
	for _, c := range []struct{ env, msg string }{
		{"DATASTORE_TYPE=kubernetes", "DATASTORE_TYPE=kubernetes: the Kubernetes datastore is not supported yet"},
		{"DATASTORE_TYPE=etcd", `DATASTORE_TYPE="etcd": must be etcdv3 or kubernetes`},
		{"KUBERNETES_SERVICE_HOST=10.96.0.1", "running in a Kubernetes pod with no ETCD_ENDPOINTS"},
	} {
		dataDir := filepath.Join(t.TempDir(), "etcd")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, binary, "node", "--nodename", "ds-node", "--etcd-data-dir", dataDir,
			"--etcd-client-url", "http://127.0.0.1:0", "--etcd-peer-url", "http://127.0.0.1:0",
			"--lib-dir", t.TempDir(), "--run-dir", t.TempDir(), "--health-addr", "", "--metrics-addr", "", "--bgp=false")
		cmd.Env = append(os.Environ(), c.env)
		var out []byte
		err := n.Do(func(ns.NetNS) error {
			var err error
			out, err = cmd.CombinedOutput()
			return err
		})
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), c.msg) {
			t.Errorf("%s: %v, output %s; want exit 2 saying %q", c.env, err, out, c.msg)
		}
		if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: an embedded etcd data directory was made (%v)", c.env, err)
		}
	}
}

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

// calico-node chooses its datastore as Calico does (store/apiconfig).
// Started with Calico's stock DaemonSet environment (DATASTORE_TYPE=
// kubernetes, no ETCD_ENDPOINTS), or in a pod with no etcd configured, it
// runs on the Kubernetes datastore (e2e/kdd_node_test.go); when it cannot
// reach the API it exits non-zero with a clear message (no way to the API
// configured: a usage error, 2; a kubeconfig or service account token
// that is not there: a start-up error, 1) and starts no embedded etcd of
// its own.
func TestNodeDatastoreTypeRefused(t *testing.T) {
	needRoot(t)
	t.Parallel()
	n := newNS(t) // should the agent not exit, it programs only this namespace
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	for _, c := range []struct {
		env  []string
		exit int
		msg  string
	}{
		{[]string{"DATASTORE_TYPE=kubernetes"}, 2, "datastore type kubernetes (DATASTORE_TYPE) but no Kubernetes API to reach"},
		{[]string{"DATASTORE_TYPE=kubernetes", "KUBECONFIG=" + kubeconfig}, 1, "calico-node: KUBECONFIG: kubeconfig " + kubeconfig + ": stat " + kubeconfig + ": no such file or directory"},
		{[]string{"DATASTORE_TYPE=etcd"}, 2, `DATASTORE_TYPE="etcd": unknown datastore type, must be etcdv3 or kubernetes`},
		{[]string{"KUBERNETES_SERVICE_HOST=10.96.0.1"}, 2, "datastore type kubernetes (default (in a Kubernetes pod, no etcd configured)) but no Kubernetes API to reach"},
		{[]string{"KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443"}, 1,
			"calico-node: in-cluster Kubernetes config: service account token: open /var/run/secrets/kubernetes.io/serviceaccount/token: no such file or directory"},
	} {
		dataDir := filepath.Join(t.TempDir(), "etcd")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, binary, "node", "--nodename", "ds-node", "--etcd-data-dir", dataDir,
			"--etcd-client-url", "http://127.0.0.1:0", "--etcd-peer-url", "http://127.0.0.1:0",
			"--lib-dir", t.TempDir(), "--run-dir", t.TempDir(), "--health-addr", "", "--metrics-addr", "", "--bgp=false")
		cmd.Env = append(os.Environ(), c.env...)
		var out []byte
		err := n.Do(func(ns.NetNS) error {
			var err error
			out, err = cmd.CombinedOutput()
			return err
		})
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != c.exit || !strings.Contains(string(out), c.msg) {
			t.Errorf("%s: %v, output %s; want exit %d saying %q", c.env, err, out, c.exit, c.msg)
		}
		if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: an embedded etcd data directory was made (%v)", c.env, err)
		}
	}
}

package kube_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/store/kube"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// crdsPath are our CRDs, equal to Calico's (build/crds_test.go).
const crdsPath = "../../build/k8s/crds.yaml"

// auditPolicy records every request once, when it completes.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Request
  verbs: ["delete"]
  resources: [{group: crd.projectcalico.org, resources: [ipamhandles]}]
- level: Request
  verbs: ["patch"]
  resources: [{group: "", resources: ["pods/status"]}]
- level: Metadata
`

// cluster is a real kube-apiserver with our CRDs installed, on an etcd of
// its own, with an audit log of every request, and a backend on it.
type cluster struct {
	kapi  *kubeapi.Server
	etcd  *storetest.Etcd
	audit string
	b     *kube.Backend
}

// startCluster starts a cluster; opts add apiserver flags.
func startCluster(t *testing.T, opts ...kubeapi.Option) *cluster {
	t.Helper()
	return startClusterWith(t, crdsPath, kube.New, opts...)
}

// startClusterWith starts a cluster with the CRDs of the file crds and
// the backend newBackend makes from its kubeconfig.
func startClusterWith(t *testing.T, crds string, newBackend func(kubeconfig string) (*kube.Backend, error), opts ...kubeapi.Option) *cluster {
	t.Helper()
	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &cluster{etcd: storetest.StartEtcd(t), audit: filepath.Join(dir, "audit.log")}
	opts = append([]kubeapi.Option{kubeapi.WithArgs("--audit-policy-file="+policy, "--audit-log-path="+c.audit)}, opts...)
	c.kapi = kubeapi.Start(t, c.etcd.Endpoints()[0], opts...)
	c.kapi.InstallCRDs(t, crds)
	b, err := newBackend(c.kapi.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	c.b = b
	return c
}

// namespace creates a namespace (namespaced custom resources need one).
func (c *cluster) namespace(t *testing.T, name string) {
	t.Helper()
	code, body := c.kapi.Do(t, http.MethodPost, "/api/v1/namespaces",
		map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}})
	if code != http.StatusCreated && code != http.StatusConflict {
		t.Fatalf("namespace %s: %d %s", name, code, body)
	}
}

// auditEvent is the part of an audit log line the tests read.
type auditEvent struct {
	Verb          string
	RequestURI    string
	ObjectRef     struct{ Resource, Namespace, Name, Subresource string }
	RequestObject json.RawMessage // handle deletes and pod status patches only
}

// requests are the audited requests of a resource so far, in order.
func (c *cluster) requests(t *testing.T, resource string) []auditEvent {
	t.Helper()
	f, err := os.Open(c.audit)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit log: %v: %s", err, sc.Bytes())
		}
		if ev.ObjectRef.Resource == resource {
			out = append(out, ev)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// lists counts the audited list requests of a resource.
func (c *cluster) lists(t *testing.T, resource string) int {
	n := 0
	for _, ev := range c.requests(t, resource) {
		if ev.Verb == "list" {
			n++
		}
	}
	return n
}

// compactEtcd compacts the apiserver's etcd to its current revision, so a
// watch from any older resourceVersion is answered 410 Gone.
func (c *cluster) compactEtcd(t *testing.T) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "compact-probe")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
}

// raw reads a custom resource as the API server stores it.
func (c *cluster) raw(t *testing.T, path string) map[string]any {
	t.Helper()
	code, body := c.kapi.Do(t, http.MethodGet, path, nil)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	return decode(t, body)
}

// decode parses JSON keeping numbers exact.
func decode(t testing.TB, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return m
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

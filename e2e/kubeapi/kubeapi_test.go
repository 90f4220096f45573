package kubeapi_test

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// TestKubeAPIServer runs a real kube-apiserver on an embedded etcd and drives
// it with plain HTTP: namespace, pod, list, zero-grace delete.
func TestKubeAPIServer(t *testing.T) {
	etcd := storetest.StartEtcd(t)
	began := time.Now()
	s := kubeapi.Start(t, etcd.Endpoints()[0])
	t.Logf("kubeapi.Start took %v", time.Since(began).Round(time.Millisecond))

	var version struct{ GitVersion string }
	decode(t, s, http.MethodGet, "/version", nil, http.StatusOK, &version)
	t.Logf("kube-apiserver %s", version.GitVersion)

	decode(t, s, http.MethodPost, "/api/v1/namespaces", map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "calico-test"},
	}, http.StatusCreated, nil)

	var created pod
	decode(t, s, http.MethodPost, "/api/v1/namespaces/calico-test/pods", map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "web", "labels": map[string]string{"app": "web"}},
		"spec": map[string]any{
			// Bound to a node by hand: there is no scheduler.
			"nodeName":   "node-1",
			"containers": []map[string]any{{"name": "web", "image": "registry.k8s.io/pause:3.10"}},
		},
	}, http.StatusCreated, &created)
	if created.Metadata.UID == "" || created.Spec.NodeName != "node-1" {
		t.Fatalf("created pod: %+v", created)
	}

	var list struct{ Items []pod }
	decode(t, s, http.MethodGet, "/api/v1/namespaces/calico-test/pods?labelSelector=app%3Dweb", nil, http.StatusOK, &list)
	if len(list.Items) != 1 || list.Items[0].Metadata.Name != "web" {
		t.Fatalf("pods: %+v", list.Items)
	}

	// No kubelet confirms a graceful delete: zero grace removes it at once.
	decode(t, s, http.MethodDelete, "/api/v1/namespaces/calico-test/pods/web", map[string]any{
		"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
	}, http.StatusOK, nil)
	decode(t, s, http.MethodGet, "/api/v1/namespaces/calico-test/pods/web", nil, http.StatusNotFound, nil)
	decode(t, s, http.MethodGet, "/api/v1/namespaces/calico-test/pods", nil, http.StatusOK, &list)
	if len(list.Items) != 0 {
		t.Fatalf("pods after delete: %+v", list.Items)
	}

	// Start turns off the API groups nothing uses (a cheaper start); those
	// Calico needs stay on.
	for _, g := range []string{"batch/v1", "policy/v1", "events.k8s.io/v1", "flowcontrol.apiserver.k8s.io/v1"} {
		decode(t, s, http.MethodGet, "/apis/"+g, nil, http.StatusNotFound, nil)
	}
	for _, g := range []string{"networking.k8s.io/v1", "discovery.k8s.io/v1", "apiextensions.k8s.io/v1", "rbac.authorization.k8s.io/v1"} {
		decode(t, s, http.MethodGet, "/apis/"+g, nil, http.StatusOK, nil)
	}

	// The kubeconfig names the server, its CA and the admin token.
	kc, err := os.ReadFile(s.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"server: " + s.URL, "certificate-authority-data: ", "token: " + s.Token} {
		if !strings.Contains(string(kc), want) {
			t.Errorf("kubeconfig lacks %q:\n%s", want, kc)
		}
	}
}

// TestKubeAPIServerRBAC checks the RBAC mode: no anonymous access, and a
// client-cert user with no binding is forbidden until one grants it a role.
func TestKubeAPIServerRBAC(t *testing.T) {
	etcd := storetest.StartEtcd(t)
	s := kubeapi.Start(t, etcd.Endpoints()[0])

	resp, err := s.HTTPClient().Get(s.URL + "/api/v1/namespaces")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous: %s, want 401", resp.Status)
	}

	certFile, keyFile := s.ClientCert(t, "alice", "dev")
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	alice := s.HTTPClient()
	alice.Transport.(*http.Transport).TLSClientConfig.Certificates = []tls.Certificate{cert}
	asAlice := func() int {
		t.Helper()
		resp, err := alice.Get(s.URL + "/api/v1/namespaces/default/pods")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := asAlice(); code != http.StatusForbidden {
		t.Fatalf("alice without a binding: %d, want 403", code)
	}
	// Not the built-in "view": aggregated roles stay empty without the
	// controller-manager.
	decode(t, s, http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
		"metadata": map[string]any{"name": "pod-reader"},
		"rules":    []map[string]any{{"apiGroups": []string{""}, "resources": []string{"pods"}, "verbs": []string{"get", "list", "watch"}}},
	}, http.StatusCreated, nil)
	decode(t, s, http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": "dev-pod-reader"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
		"subjects": []map[string]any{{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "dev"}},
	}, http.StatusCreated, nil)
	// The authorizer sees the binding through its informer: allow a moment.
	deadline := time.Now().Add(10 * time.Second)
	for code := asAlice(); code != http.StatusOK; code = asAlice() {
		if time.Now().After(deadline) {
			t.Fatalf("alice bound to pod-reader: %d, want 200", code)
		}
		time.Sleep(100 * time.Millisecond)
	}

	kc, err := os.ReadFile(s.KubeconfigFor(t, "bob", "dev"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"server: " + s.URL, "client-certificate-data: ", "client-key-data: ", `user: "bob"`} {
		if !strings.Contains(string(kc), want) {
			t.Errorf("kubeconfig lacks %q:\n%s", want, kc)
		}
	}
}

type pod struct {
	Metadata struct{ Name, Namespace, UID string }
	Spec     struct{ NodeName string }
}

// decode sends a request as admin, checks the status and decodes the JSON
// answer into out (if not nil).
func decode(t *testing.T, s *kubeapi.Server, method, path string, body any, want int, out any) {
	t.Helper()
	code, b := s.Do(t, method, path, body)
	if code != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, code, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

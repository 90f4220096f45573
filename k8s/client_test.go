package k8s

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeKubeconfig writes a kubeconfig for server with token "secret";
// client-go sends credentials only over TLS, so an https server comes with
// its certificate.
func writeKubeconfig(t *testing.T, server string, cert *x509.Certificate) string {
	t.Helper()
	ca := ""
	if cert != nil {
		ca = "\n    certificate-authority-data: " + base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}))
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s%s
users:
- name: u
  user:
    token: secret
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`, server, ca)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func status(code int, reason string) string {
	return fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d}`, reason, code)
}

// fakeAPI answers the paths the client reads with canned core/v1 JSON.
func fakeAPI(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, status(401, "Unauthorized"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/namespaces/shop/pods/web":
			fmt.Fprint(w, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web","namespace":"shop","labels":{"app":"web"},
"annotations":{"cni.projectcalico.org/ipAddrs":"[\"10.1.0.5\"]"}},
"spec":{"serviceAccountName":"shopper","nodeName":"n1","containers":[{"name":"c","ports":[{"name":"http","containerPort":8080}]}]}}`)
		case "/api/v1/namespaces/shop":
			fmt.Fprint(w, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"shop","labels":{"team":"a"}}}`)
		case "/api/v1/namespaces/shop/serviceaccounts/shopper":
			fmt.Fprint(w, `{"kind":"ServiceAccount","apiVersion":"v1","metadata":{"name":"shopper","namespace":"shop","labels":{"role":"buyer"}}}`)
		case "/api/v1/nodes/n1":
			fmt.Fprint(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1"},"spec":{"podCIDR":"10.244.1.0/24","podCIDRs":["10.244.1.0/24","fd00::/64"]}}`)
		case "/api/v1/namespaces/secret":
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, status(403, "Forbidden"))
		case "/api/v1/nodes/sick":
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, status(503, "ServiceUnavailable"))
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, status(404, "NotFound"))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func apiKubeconfig(t *testing.T) string {
	srv := fakeAPI(t)
	return writeKubeconfig(t, srv.URL, srv.Certificate())
}

func TestClientReads(t *testing.T) {
	c, err := NewClient(apiKubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pod, err := c.GetPod(ctx, "shop", "web")
	if err != nil {
		t.Fatal(err)
	}
	if pod.Metadata.Labels["app"] != "web" || pod.Spec.ServiceAccountName != "shopper" ||
		pod.Metadata.Annotations["cni.projectcalico.org/ipAddrs"] != `["10.1.0.5"]` ||
		len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Ports[0].ContainerPort != 8080 {
		t.Errorf("pod: %+v", pod)
	}
	ns, err := c.GetNamespace(ctx, "shop")
	if err != nil || ns.Metadata.Labels["team"] != "a" {
		t.Errorf("namespace: %+v %v", ns, err)
	}
	sa, err := c.GetServiceAccount(ctx, "shop", "shopper")
	if err != nil || sa.Metadata.Labels["role"] != "buyer" {
		t.Errorf("service account: %+v %v", sa, err)
	}
	node, err := c.GetNode(ctx, "n1")
	if err != nil || node.Spec.PodCIDR != "10.244.1.0/24" || len(node.Spec.PodCIDRs) != 2 {
		t.Errorf("node: %+v %v", node, err)
	}
}

func TestClientErrors(t *testing.T) {
	ctx := context.Background()
	c, err := NewClient(apiKubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetPod(ctx, "shop", "gone")
	if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnreachable) || err.Error() != "pod shop/gone not found" {
		t.Errorf("missing pod: %v", err)
	}
	if _, err = c.GetNamespace(ctx, "secret"); !errors.Is(err, ErrDenied) {
		t.Errorf("forbidden: %v", err)
	}
	if _, err = c.GetNode(ctx, "sick"); !errors.Is(err, ErrUnreachable) {
		t.Errorf("503: %v", err)
	}

	// Nothing listening: unreachable, and quickly.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err = NewClient(writeKubeconfig(t, "https://"+addr, nil))
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err = c.GetPod(ctx, "shop", "web")
	if !errors.Is(err, ErrUnreachable) || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), addr) {
		t.Errorf("no server: %v", err)
	}
	if d := time.Since(began); d > RequestTimeout {
		t.Errorf("no server: took %v", d)
	}

	// A kubeconfig that is not there is an error of NewClient.
	if _, err := NewClient(filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "none") {
		t.Errorf("missing kubeconfig: %v", err)
	}
}

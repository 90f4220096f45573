package apiconfig

import (
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// apiServer is a TLS server that answers /version with the bearer token it
// was sent; its CA is written to a file.
type apiServer struct {
	*httptest.Server
	caFile string
}

func newAPIServer(t *testing.T) *apiServer {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	}))
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.crt")
	writeFile(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	return &apiServer{Server: srv, caFile: ca}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// tokenSeen makes a real request with cfg and returns the token the server
// saw.
func tokenSeen(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(cfg.Host + "/version")
	if err != nil {
		t.Fatalf("request with %+v: %v", cfg, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// kubeconfig is a kubeconfig with one context per user token; the first
// is current.
func kubeconfig(server, caFile string, tokens ...string) string {
	var ctxs, users strings.Builder
	for i, tok := range tokens {
		fmt.Fprintf(&ctxs, "- name: c%d\n  context: {cluster: k, user: u%d}\n", i, i)
		fmt.Fprintf(&users, "- name: u%d\n  user: {token: %s}\n", i, tok)
	}
	return fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: k\n  cluster: {server: %q, certificate-authority: %q}\ncontexts:\n%scurrent-context: c0\nusers:\n%s",
		server, caFile, ctxs.String(), users.String())
}

// A kubeconfig reaches the server with its CA and token; the explicit
// settings override it (token, context), a list of files merges as
// KUBECONFIG does, and the inline form replaces the files.
func TestRESTConfigKubeconfig(t *testing.T) {
	srv := newAPIServer(t)
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	writeFile(t, kc, kubeconfig(srv.URL, srv.caFile, "t0", "t1"))
	h := fakeHost(nil, nil)
	for _, c := range []struct {
		name string
		kube Kube
		want string
	}{
		{"file", Kube{Kubeconfig: kc}, "t0"},
		{"token over the file", Kube{Kubeconfig: kc, Token: "explicit"}, "explicit"},
		{"context", Kube{Kubeconfig: kc, CurrentContext: "c1"}, "t1"},
		{"inline", Kube{KubeconfigInline: kubeconfig(srv.URL, srv.caFile, "inline"), Kubeconfig: "/missing"}, "inline"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := c.kube.RESTConfig(h)
			if err != nil {
				t.Fatal(err)
			}
			if got := tokenSeen(t, cfg); got != c.want {
				t.Errorf("server saw token %q, want %q", got, c.want)
			}
		})
	}

	// The first file of a list to set a user wins.
	other := filepath.Join(dir, "other")
	writeFile(t, other, kubeconfig(srv.URL, srv.caFile, "from-other"))
	cfg, err := Kube{Kubeconfig: other + string(filepath.ListSeparator) + kc, QPS: 33}.RESTConfig(h)
	if err != nil {
		t.Fatal(err)
	}
	if got := tokenSeen(t, cfg); got != "from-other" || cfg.QPS != 33 {
		t.Errorf("list: token %q qps %v", got, cfg.QPS)
	}

	// The endpoint overrides the kubeconfig's server: a wrong one fails.
	cfg, err = Kube{Kubeconfig: kc, APIEndpoint: "https://127.0.0.1:1"}.RESTConfig(h)
	if err != nil || cfg.Host != "https://127.0.0.1:1" {
		t.Errorf("endpoint over the file: %v %v", cfg, err)
	}
}

// With no kubeconfig: the explicit endpoint with its CA and token, and the
// insecure flag instead of a CA; without the CA the server's certificate is
// refused.
func TestRESTConfigEndpoint(t *testing.T) {
	srv := newAPIServer(t)
	h := fakeHost(nil, nil)
	cfg, err := Kube{APIEndpoint: srv.URL, CAFile: srv.caFile, Token: "tok"}.RESTConfig(h)
	if err != nil {
		t.Fatal(err)
	}
	if got := tokenSeen(t, cfg); got != "tok" {
		t.Errorf("token %q", got)
	}
	cfg, err = Kube{APIEndpoint: srv.URL, InsecureSkipTLSVerify: true, Token: "tok2"}.RESTConfig(h)
	if err != nil {
		t.Fatal(err)
	}
	if got := tokenSeen(t, cfg); got != "tok2" {
		t.Errorf("insecure: token %q", got)
	}
	cfg, err = Kube{APIEndpoint: srv.URL, Token: "tok"}.RESTConfig(h)
	if err != nil {
		t.Fatal(err)
	}
	hc, _ := rest.HTTPClientFor(cfg)
	var uerr *url.Error
	if _, err := hc.Get(cfg.Host + "/version"); !errors.As(err, &uerr) || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("no CA: %v, want a certificate error", err)
	}
	cfg, err = Kube{APIEndpoint: srv.URL, CertFile: "/c", KeyFile: "/k"}.RESTConfig(h)
	if err == nil {
		t.Errorf("missing client certificate files accepted: %+v", cfg)
	}
}

// In a pod: the service variables, the mounted token (read again as it
// rotates) and CA; an explicit token or CA overrides them.
func TestRESTConfigInCluster(t *testing.T) {
	srv := newAPIServer(t)
	u, _ := url.Parse(srv.URL)
	sa := t.TempDir()
	writeFile(t, filepath.Join(sa, "token"), "pod-token\n")
	ca, _ := os.ReadFile(srv.caFile)
	writeFile(t, filepath.Join(sa, "ca.crt"), string(ca))
	env := map[string]string{"KUBERNETES_SERVICE_HOST": u.Hostname(), "KUBERNETES_SERVICE_PORT": u.Port()}
	h := Host{Getenv: func(k string) string { return env[k] }, ReadFile: os.ReadFile, ServiceAccountDir: sa}

	cfg, err := Kube{}.RESTConfig(h)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != srv.URL || cfg.BearerTokenFile != filepath.Join(sa, "token") {
		t.Errorf("host %s token file %s", cfg.Host, cfg.BearerTokenFile)
	}
	if got := tokenSeen(t, cfg); got != "pod-token" {
		t.Errorf("token %q", got)
	}
	cfg, err = Kube{Token: "explicit", CAFile: srv.caFile}.RESTConfig(h)
	if err != nil {
		t.Fatal(err)
	}
	if got := tokenSeen(t, cfg); got != "explicit" || cfg.BearerTokenFile != "" {
		t.Errorf("explicit token: %q (file %q)", got, cfg.BearerTokenFile)
	}
	cfg, err = Kube{InsecureSkipTLSVerify: true}.RESTConfig(h)
	if err != nil || !cfg.Insecure || cfg.CAFile != "" {
		t.Errorf("insecure in cluster: %+v %v", cfg, err)
	}
	if _, err := (Kube{CurrentContext: "prod"}).RESTConfig(h); err == nil || !strings.Contains(err.Error(), `context ("prod")`) {
		t.Errorf("context without kubeconfig: %v", err)
	}

	// Not in a pod, nothing configured.
	_, err = Kube{}.RESTConfig(fakeHost(nil, nil))
	if !errors.Is(err, ErrNoKubernetesAPI) {
		t.Errorf("nothing: %v", err)
	}
	// In a pod without a token.
	h.ServiceAccountDir = t.TempDir()
	if _, err := (Kube{}).RESTConfig(h); err == nil || !strings.Contains(err.Error(), "service account token") {
		t.Errorf("no token: %v", err)
	}
}

// A resolved Config's errors name where the kubeconfig came from.
func TestConfigRESTConfigNamesSource(t *testing.T) {
	h := fakeHost(map[string]string{"DATASTORE_TYPE": "kubernetes", "KUBECONFIG": filepath.Join(t.TempDir(), "none")}, nil)
	cfg, err := FromEnv(h, EtcdFlags{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.RESTConfig(h); err == nil || !strings.HasPrefix(err.Error(), "KUBECONFIG: kubeconfig ") {
		t.Errorf("missing kubeconfig: %v", err)
	}
}

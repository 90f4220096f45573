package build_test

// The CNI plugin's kubeconfig: install-cni.sh, run in a pod, writes
// calico-kubeconfig from the pod's service account (token and CA) and the
// KUBERNETES_SERVICE_* address, and names it in the conflist;
// --watch-kubeconfig keeps it current as the token rotates. Here the
// service account is a directory of our own; rbac_test.go does the same
// against a real kube-apiserver.

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/storetest"
)

const (
	// kubeconfigFile is the CNI plugin's kubeconfig on the host; the
	// conflist names it.
	kubeconfigFile = "/etc/cni/net.d/calico-kubeconfig"
	kubeconfigRel  = "etc/cni/net.d/calico-kubeconfig" // under DESTDIR
	testToken      = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJl"
)

// serviceAccount is a directory laid out as the kubelet mounts a pod's
// service account at /var/run/secrets/kubernetes.io/serviceaccount.
type serviceAccount struct {
	dir string
	ca  []byte // ca.crt's content
}

func (sa serviceAccount) tokenFile() string { return filepath.Join(sa.dir, "token") }
func (sa serviceAccount) caFile() string    { return filepath.Join(sa.dir, "ca.crt") }

// fakeServiceAccount writes token and a freshly made CA certificate.
func fakeServiceAccount(t *testing.T, token string) serviceAccount {
	t.Helper()
	sa := serviceAccount{dir: filepath.Join(t.TempDir(), "serviceaccount"), ca: testCA(t)}
	if err := os.MkdirAll(sa.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sa.setToken(t, token)
	sa.setCA(t, sa.ca)
	return sa
}

// setToken replaces the token the way the kubelet does: a new file renamed
// over the old, never a partial one.
func (sa serviceAccount) setToken(t *testing.T, token string) {
	t.Helper()
	replaceFile(t, sa.tokenFile(), []byte(token))
}

func (sa *serviceAccount) setCA(t *testing.T, ca []byte) {
	t.Helper()
	sa.ca = ca
	replaceFile(t, sa.caFile(), ca)
}

func replaceFile(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// testCA is a fresh self-signed CA certificate in PEM.
func testCA(t *testing.T) []byte {
	t.Helper()
	caFile, _, _, _, _ := storetest.WriteTestCerts(t, t.TempDir())
	b, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// podEnv is the environment install-cni sees in a pod: the kubelet's
// KUBERNETES_SERVICE_* variables and the service account mount.
func podEnv(sa serviceAccount, host, port string) map[string]string {
	return map[string]string{
		"SERVICE_ACCOUNT_PATH":    sa.dir,
		"KUBERNETES_SERVICE_HOST": host,
		"KUBERNETES_SERVICE_PORT": port,
	}
}

// loadKubeconfig checks a kubeconfig's mode (0600: it may hold a token),
// parses it with client-go and returns its current context's cluster and
// user.
func loadKubeconfig(t *testing.T, path string) (*clientcmdapi.Cluster, *clientcmdapi.AuthInfo) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("kubeconfig not written: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want 0600", path, fi.Mode().Perm())
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatalf("client-go cannot load %s: %v", path, err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		t.Fatalf("%s: current context %q does not exist", path, cfg.CurrentContext)
	}
	cluster, user := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
	if cluster == nil || user == nil {
		t.Fatalf("%s: context %q names a missing cluster %q or user %q", path, cfg.CurrentContext, ctx.Cluster, ctx.AuthInfo)
	}
	return cluster, user
}

// tokenIn returns the token a kubeconfig holds ("" if unreadable).
func tokenIn(path string) string {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return ""
	}
	if ctx := cfg.Contexts[cfg.CurrentContext]; ctx != nil && cfg.AuthInfos[ctx.AuthInfo] != nil {
		return cfg.AuthInfos[ctx.AuthInfo].Token
	}
	return ""
}

func TestInstallKubeconfig(t *testing.T) {
	for _, tc := range []struct {
		name, proto, host, port, server string
	}{
		{"IPv4", "", "10.96.0.1", "443", "https://10.96.0.1:443"},
		{"IPv6", "", "fd00:10:96::1", "6443", "https://[fd00:10:96::1]:6443"},
		{"IPv6 in brackets", "", "[fd00::1]", "443", "https://[fd00::1]:443"},
		{"name", "", "kubernetes.default.svc", "443", "https://kubernetes.default.svc:443"},
		{"http", "http", "127.0.0.1", "8080", "http://127.0.0.1:8080"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The kubelet writes the token without a final newline; one is
			// tolerated.
			sa := fakeServiceAccount(t, testToken+"\n")
			env := podEnv(sa, tc.host, tc.port)
			if tc.proto != "" {
				env["KUBERNETES_SERVICE_PROTOCOL"] = tc.proto
			}
			nodeKC := filepath.Join(t.TempDir(), "calico-node", "kubeconfig")
			env["NODE_KUBECONFIG"] = nodeKC
			root := t.TempDir()
			mustInstall(t, root, env, "--source", fakeBinary(t))

			if got, want := files(tree(t, root)), sorted(cniFiles, []string{kubeconfigRel}); !reflect.DeepEqual(got, want) {
				t.Errorf("installed files %v, want exactly %v", got, want)
			}
			cluster, user := loadKubeconfig(t, filepath.Join(root, kubeconfigRel))
			if cluster.Server != tc.server {
				t.Errorf("server %q, want %q", cluster.Server, tc.server)
			}
			if !bytes.Equal(cluster.CertificateAuthorityData, sa.ca) {
				t.Errorf("certificate-authority-data is not the service account's ca.crt:\n%s", cluster.CertificateAuthorityData)
			}
			if cluster.CertificateAuthority != "" || cluster.InsecureSkipTLSVerify {
				t.Errorf("cluster %+v: want only the embedded CA", cluster)
			}
			if user.Token != testToken || user.TokenFile != "" || user.ClientCertificate != "" || user.Username != "" {
				t.Errorf("user %+v, want only token %q", user, testToken)
			}
			// client-go builds a client from it (the CA parses).
			kc, err := k8s.NewClient(filepath.Join(root, kubeconfigRel))
			if err != nil {
				t.Fatalf("k8s.NewClient: %v", err)
			}
			if !strings.HasPrefix(kc.Server(), tc.server) {
				t.Errorf("client's server %q, want %q", kc.Server(), tc.server)
			}

			c := plugin(t, readConflist(t, root), "calico")
			if want := map[string]any{"kubeconfig": kubeconfigFile}; !reflect.DeepEqual(c["kubernetes"], want) {
				t.Errorf("kubernetes = %v, want %v", c["kubernetes"], want)
			}
			if want := map[string]any{"type": "k8s"}; !reflect.DeepEqual(c["policy"], want) {
				t.Errorf("policy = %v, want %v", c["policy"], want)
			}

			// calico-node's kubeconfig names the files, so that client-go
			// rereads the token as the kubelet rotates it.
			cluster, user = loadKubeconfig(t, nodeKC)
			if cluster.Server != tc.server || cluster.CertificateAuthority != sa.caFile() || len(cluster.CertificateAuthorityData) != 0 {
				t.Errorf("calico-node's cluster %+v, want server %s and certificate-authority %s", cluster, tc.server, sa.caFile())
			}
			if user.TokenFile != sa.tokenFile() || user.Token != "" {
				t.Errorf("calico-node's user %+v, want tokenFile %s", user, sa.tokenFile())
			}
			if _, err := k8s.NewClient(nodeKC); err != nil {
				t.Errorf("k8s.NewClient(calico-node's kubeconfig): %v", err)
			}
		})
	}
}

// Outside a pod (no token) nothing about Kubernetes is written.
func TestInstallKubeconfigNotInPod(t *testing.T) {
	root := t.TempDir()
	nodeKC := filepath.Join(t.TempDir(), "kubeconfig")
	r := install(t, root, map[string]string{
		"KUBERNETES_SERVICE_HOST": "10.96.0.1",
		"KUBERNETES_SERVICE_PORT": "443",
		"NODE_KUBECONFIG":         nodeKC,
	}, "--source", fakeBinary(t))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "no service account token") {
		t.Errorf("stderr does not say why no kubeconfig is written: %q", r.stderr)
	}
	if got, want := files(tree(t, root)), sorted(cniFiles); !reflect.DeepEqual(got, want) {
		t.Errorf("installed files %v, want exactly %v", got, want)
	}
	if _, err := os.Stat(nodeKC); err == nil {
		t.Error("NODE_KUBECONFIG written outside a pod")
	}
	c := plugin(t, readConflist(t, root), "calico")
	for _, k := range []string{"kubernetes", "policy"} {
		if v, ok := c[k]; ok {
			t.Errorf("calico plugin has %s = %v; want none outside a pod", k, v)
		}
	}
}

// An operator's KUBECONFIG wins over the service account.
func TestInstallKubeconfigOperatorKubeconfig(t *testing.T) {
	root := t.TempDir()
	env := podEnv(fakeServiceAccount(t, testToken), "10.96.0.1", "443")
	env["KUBECONFIG"] = "/etc/kubernetes/calico.conf"
	mustInstall(t, root, env, "--source", fakeBinary(t))
	if _, err := os.Stat(filepath.Join(root, kubeconfigRel)); err == nil {
		t.Error("calico-kubeconfig written although KUBECONFIG is set")
	}
	c := plugin(t, readConflist(t, root), "calico")
	if want := map[string]any{"kubeconfig": "/etc/kubernetes/calico.conf"}; !reflect.DeepEqual(c["kubernetes"], want) {
		t.Errorf("kubernetes = %v, want %v", c["kubernetes"], want)
	}
}

func TestInstallKubeconfigSkipTLSVerify(t *testing.T) {
	sa := fakeServiceAccount(t, testToken)
	if err := os.Remove(sa.caFile()); err != nil {
		t.Fatal(err)
	}
	env := podEnv(sa, "10.96.0.1", "443")
	env["SKIP_TLS_VERIFY"] = "true"
	root := t.TempDir()
	mustInstall(t, root, env, "--source", fakeBinary(t))
	cluster, user := loadKubeconfig(t, filepath.Join(root, kubeconfigRel))
	if !cluster.InsecureSkipTLSVerify || len(cluster.CertificateAuthorityData) != 0 || user.Token != testToken {
		t.Errorf("cluster %+v user %+v: want insecure-skip-tls-verify, no CA, the token", cluster, user)
	}
}

// Calico's placeholders for the API server and the token, in a custom config.
func TestInstallKubeconfigPlaceholders(t *testing.T) {
	root := t.TempDir()
	env := podEnv(fakeServiceAccount(t, testToken), "10.96.0.1", "443")
	env["CNI_NETWORK_CONFIG"] = `{"name":"custom","cniVersion":"0.4.0","plugins":[{"type":"calico",` +
		`"etcd_endpoints":"__ETCD_ENDPOINTS__","ipam":{"type":"calico-ipam"},"policy":{"type":"k8s"},` +
		`"kubernetes":{"kubeconfig":"__KUBECONFIG_FILEPATH__",` +
		`"k8s_api_root":"https://__KUBERNETES_SERVICE_HOST__:__KUBERNETES_SERVICE_PORT__",` +
		`"k8s_auth_token":"__SERVICEACCOUNT_TOKEN__"}}]}`
	mustInstall(t, root, env, "--source", fakeBinary(t))
	c := plugin(t, readConflist(t, root), "calico")
	want := map[string]any{
		"kubeconfig":     kubeconfigFile,
		"k8s_api_root":   "https://10.96.0.1:443",
		"k8s_auth_token": testToken,
	}
	if !reflect.DeepEqual(c["kubernetes"], want) {
		t.Errorf("kubernetes = %v, want %v", c["kubernetes"], want)
	}
	if _, err := os.Stat(filepath.Join(root, kubeconfigRel)); err != nil {
		t.Errorf("calico-kubeconfig not written for a custom config: %v", err)
	}
}

func TestInstallKubeconfigErrors(t *testing.T) {
	cases := []struct {
		name   string
		change func(env map[string]string, sa serviceAccount)
		want   string // in stderr
	}{
		{"no host", func(env map[string]string, _ serviceAccount) { delete(env, "KUBERNETES_SERVICE_HOST") }, "KUBERNETES_SERVICE_HOST"},
		{"bad host", func(env map[string]string, _ serviceAccount) { env["KUBERNETES_SERVICE_HOST"] = "10.0.0.1/evil" }, "KUBERNETES_SERVICE_HOST"},
		{"no port", func(env map[string]string, _ serviceAccount) { delete(env, "KUBERNETES_SERVICE_PORT") }, "KUBERNETES_SERVICE_PORT"},
		{"bad port", func(env map[string]string, _ serviceAccount) { env["KUBERNETES_SERVICE_PORT"] = "70000" }, "KUBERNETES_SERVICE_PORT"},
		{"bad protocol", func(env map[string]string, _ serviceAccount) { env["KUBERNETES_SERVICE_PROTOCOL"] = "ftp" }, "KUBERNETES_SERVICE_PROTOCOL"},
		{"no CA", func(_ map[string]string, sa serviceAccount) { os.Remove(sa.caFile()) }, "ca.crt"},
		{"CA not PEM", func(_ map[string]string, sa serviceAccount) { os.WriteFile(sa.caFile(), []byte("junk"), 0o644) }, "ca.crt"},
		{"empty token", func(_ map[string]string, sa serviceAccount) { os.WriteFile(sa.tokenFile(), nil, 0o644) }, "token"},
		{"token with control characters", func(_ map[string]string, sa serviceAccount) {
			os.WriteFile(sa.tokenFile(), []byte("abc\x1bdef"), 0o644)
		}, "token"},
		{"bad SKIP_TLS_VERIFY", func(env map[string]string, _ serviceAccount) { env["SKIP_TLS_VERIFY"] = "yes" }, "SKIP_TLS_VERIFY"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sa := fakeServiceAccount(t, testToken)
			env := podEnv(sa, "10.96.0.1", "443")
			tc.change(env, sa)
			installFails(t, env, tc.want, "--source", fakeBinary(t))
		})
	}
}

// A rerun with the same token changes nothing; with a rotated token only
// the kubeconfig; --uninstall removes it.
func TestInstallKubeconfigRerunAndUninstall(t *testing.T) {
	sa := fakeServiceAccount(t, testToken)
	env := podEnv(sa, "10.96.0.1", "443")
	src := fakeBinary(t)
	root := t.TempDir()
	mustInstall(t, root, env, "--source", src)
	first := tree(t, root)
	mustInstall(t, root, env, "--source", src)
	if second := tree(t, root); !reflect.DeepEqual(first, second) {
		t.Errorf("second run changed the tree:\nfirst:  %v\nsecond: %v", first, second)
	}

	sa.setToken(t, "rotated-token")
	mustInstall(t, root, env, "--source", src)
	third := tree(t, root)
	for p, d := range third {
		if changed := d != first[p]; changed != (p == kubeconfigRel) {
			t.Errorf("%s: changed %v after a token rotation", p, changed)
		}
	}
	if got := tokenIn(filepath.Join(root, kubeconfigRel)); got != "rotated-token" {
		t.Errorf("token after rotation %q", got)
	}

	mustInstall(t, root, env, "--uninstall")
	if got := files(tree(t, root)); len(got) != 0 {
		t.Errorf("after --uninstall: %v", got)
	}
}

// --watch-kubeconfig, as the DaemonSet's cni-kubeconfig container runs it:
// it writes the kubeconfig, follows token and CA changes, survives a
// missing token, touches nothing else, and stops cleanly on SIGTERM.
func TestWatchKubeconfig(t *testing.T) {
	sa := fakeServiceAccount(t, "token-1")
	env := podEnv(sa, "10.96.0.1", "443")
	env["KUBECONFIG_REFRESH_INTERVAL"] = "0.1"
	root := t.TempDir()
	cmd := scriptCommand(t, root, env, "--watch-kubeconfig")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
		}
	})
	path := filepath.Join(root, kubeconfigRel)
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			select {
			case err := <-exited:
				stopped = true
				t.Fatalf("--watch-kubeconfig exited (%v) waiting for %s", err, what)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("the first kubeconfig", func() bool { return tokenIn(path) == "token-1" })
	loadKubeconfig(t, path)

	sa.setToken(t, "token-2")
	waitFor("the rotated token", func() bool { return tokenIn(path) == "token-2" })

	newCA := testCA(t)
	sa.setCA(t, newCA)
	waitFor("the new CA", func() bool {
		cfg, err := clientcmd.LoadFromFile(path)
		return err == nil && bytes.Equal(cfg.Clusters["kubernetes"].CertificateAuthorityData, newCA)
	})

	// A token that is briefly gone leaves the kubeconfig as it was.
	if err := os.Remove(sa.tokenFile()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if got := tokenIn(path); got != "token-2" {
		t.Errorf("token %q after the token file went, want token-2 kept", got)
	}
	sa.setToken(t, "token-3")
	waitFor("the token after it came back", func() bool { return tokenIn(path) == "token-3" })

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("--watch-kubeconfig on SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("--watch-kubeconfig did not stop within 5 s of SIGTERM")
	}
	// Nothing else, and no temporary file even if the signal came mid-write.
	if got, want := files(tree(t, root)), []string{kubeconfigRel}; !reflect.DeepEqual(got, want) {
		t.Errorf("--watch-kubeconfig left %v, want only %v", got, want)
	}
}

func TestWatchKubeconfigErrors(t *testing.T) {
	sa := fakeServiceAccount(t, testToken)
	for name, env := range map[string]map[string]string{
		"not in a pod":   {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"},
		"KUBECONFIG set": {"SERVICE_ACCOUNT_PATH": sa.dir, "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", "KUBECONFIG": "/etc/kube.conf"},
		"bad interval":   {"SERVICE_ACCOUNT_PATH": sa.dir, "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", "KUBECONFIG_REFRESH_INTERVAL": "0"},
		"no host":        {"SERVICE_ACCOUNT_PATH": sa.dir},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			r := install(t, root, env, "--watch-kubeconfig")
			if r.code == 0 || !strings.Contains(r.stderr, "error") {
				t.Errorf("exit %d, stderr %q: want an error", r.code, r.stderr)
			}
			if got := files(tree(t, root)); len(got) != 0 {
				t.Errorf("left files behind: %v", got)
			}
		})
	}
}

// --help prints the usage (set -u: every variable it names is escaped).
func TestInstallHelp(t *testing.T) {
	r := install(t, t.TempDir(), nil, "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "--watch-kubeconfig") || !strings.Contains(r.stdout, "SERVICE_ACCOUNT_PATH") {
		t.Errorf("--help: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

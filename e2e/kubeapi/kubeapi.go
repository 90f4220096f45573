// Package kubeapi starts a real kube-apiserver for tests, on loopback, backed
// by an etcd the test already runs (kube-apiserver keeps its data under
// /registry, so it can share the member Calico uses under /calico).
//
// The binary is built from the k8s.io/kubernetes module pinned in
// tools/kube-apiserver (a separate Go module) by tools/kube-apiserver/build.sh
// and cached outside the work tree; set KUBE_APISERVER to use another binary.
// This package imports no Kubernetes library: tests speak plain HTTP+JSON.
//
// There is no controller-manager and no scheduler: namespaces never finish
// terminating (use fresh names rather than deleting them), pods are never
// scheduled, and a pod bound to a node needs gracePeriodSeconds=0 to go away.
// The ServiceAccount admission plugin is off, so pods need no service account.
package kubeapi

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/internal/freeport"
)

// Server is a running kube-apiserver.
type Server struct {
	URL            string // https://127.0.0.1:PORT
	Token          string // bearer token of the admin user (group system:masters)
	KubeconfigPath string // kubeconfig for the admin user
	CAFile         string // PEM CA that signed the serving cert (and ClientCert's certs)
	Dir            string // temp dir with the certs, keys, token file and log
	LogPath        string // the apiserver's stdout and stderr

	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	bin    string
	args   []string
	cmd    *exec.Cmd
	exited chan struct{}
	stop   sync.Once

	clientOnce sync.Once
	client     *http.Client // Do's, shared so connections are reused
}

// Option changes how Start runs the apiserver.
type Option func(*options)

type options struct {
	authorization string
	args          []string
	readyTimeout  time.Duration
}

// WithAuthorization sets --authorization-mode (default "RBAC"; the admin
// token is in system:masters, which RBAC always allows). "AlwaysAllow" lets
// every authenticated user do anything.
func WithAuthorization(mode string) Option {
	return func(o *options) { o.authorization = mode }
}

// WithArgs appends flags to the kube-apiserver command line; a flag given
// again overrides Start's own.
func WithArgs(args ...string) Option {
	return func(o *options) { o.args = append(o.args, args...) }
}

// WithReadyTimeout sets how long Start waits for /readyz (default 60 s).
func WithReadyTimeout(d time.Duration) Option {
	return func(o *options) { o.readyTimeout = d }
}

// unusedAPIs is --runtime-config turning off the built-in API groups that
// neither the tests nor Calico use (see docs/PERFORMANCE.md, CI budget).
const unusedAPIs = "batch/v1=false,autoscaling/v1=false,autoscaling/v2=false,policy/v1=false," +
	"certificates.k8s.io/v1=false,events.k8s.io/v1=false,flowcontrol.apiserver.k8s.io/v1=false"

// Start runs kube-apiserver against etcdEndpoint (a client URL such as
// storetest.StartEtcd(t).Endpoints()[0]) and returns once /readyz answers 200.
// The server is stopped when the test ends; its log is dumped if the test
// failed. Without a binary at hand Start builds one (minutes, once); when that
// fails, or under -short with nothing cached, it skips the test, except with
// CI=true where a failure to build is fatal.
func Start(t testing.TB, etcdEndpoint string, opts ...Option) *Server {
	t.Helper()
	o := options{authorization: "RBAC", readyTimeout: 60 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	bin := Binary(t)

	dir := t.TempDir()
	s := &Server{Dir: dir, LogPath: filepath.Join(dir, "kube-apiserver.log"), exited: make(chan struct{})}
	s.writeCerts(t)
	saKey := filepath.Join(dir, "sa-key.pem")
	writeRSAKey(t, saKey)
	s.Token = randomHex(t, 16)
	tokens := filepath.Join(dir, "tokens.csv")
	writeFile(t, tokens, []byte(s.Token+`,admin,admin,"system:masters"`+"\n"))

	port := freePort(t)
	s.URL = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s.KubeconfigPath = filepath.Join(dir, "kubeconfig")
	s.writeKubeconfig(t, s.KubeconfigPath, "admin", "token: "+s.Token)

	args := []string{
		"--etcd-servers=" + etcdEndpoint,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--tls-cert-file=" + filepath.Join(dir, "serving.pem"),
		"--tls-private-key-file=" + filepath.Join(dir, "serving-key.pem"),
		"--client-ca-file=" + s.CAFile,
		"--token-auth-file=" + tokens,
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=" + o.authorization,
		"--anonymous-auth=false",
		"--disable-admission-plugins=ServiceAccount",
		// No controller-manager keeps the kubernetes Service's endpoints.
		"--endpoint-reconciler-type=none",
		// Calico's node DaemonSet runs privileged pods.
		"--allow-privileged=true",
		"--profiling=false",
		"--shutdown-delay-duration=0s",
		"--shutdown-send-retry-after=false",
		// Less to set up at each start (about 18% of its CPU): no
		// priority-and-fairness, and none of the API groups that no test
		// and no part of Calico uses.
		"--enable-priority-and-fairness=false",
		"--runtime-config=" + unusedAPIs,
	}
	s.bin, s.args = bin, append(args, o.args...)
	started := time.Now()
	if err := s.launch(); err != nil {
		t.Fatalf("kube-apiserver: %v", err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			s.dumpLog(t)
		}
	})

	if err := s.waitReady(o.readyTimeout); err != nil {
		s.Stop()
		s.dumpLog(t)
		t.Fatalf("kube-apiserver: %v", err)
	}
	t.Logf("kube-apiserver %s ready in %v", s.URL, time.Since(started).Round(time.Millisecond))
	return s
}

// Binary returns the kube-apiserver binary: $KUBE_APISERVER if set, else the
// one tools/kube-apiserver/build.sh caches, building it if needed (see Start
// for when that skips the test).
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("KUBE_APISERVER"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("KUBE_APISERVER: %v", err)
		}
		return p
	}
	ci := os.Getenv("CI") == "true"
	fail := func(format string, a ...any) {
		t.Helper()
		if ci {
			t.Fatalf(format, a...)
		}
		t.Skipf(format, a...)
	}
	script, err := buildScript()
	if err != nil {
		fail("kube-apiserver: %v", err)
	}
	out, err := exec.Command(script, "--path").Output()
	if err != nil {
		fail("kube-apiserver: %s --path: %v", script, err)
	}
	bin := strings.TrimSpace(string(out))
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if testing.Short() {
		t.Skipf("kube-apiserver not built (-short builds nothing): run %s or make kube-apiserver", script)
	}
	t.Logf("kube-apiserver: building with %s (a few minutes, once)", script)
	began := time.Now()
	var stderr bytes.Buffer
	cmd := exec.Command(script)
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err != nil {
		fail("kube-apiserver: %s: %v\n%s", script, err, stderr.Bytes())
	}
	t.Logf("kube-apiserver: built in %v", time.Since(began).Round(time.Second))
	return strings.TrimSpace(string(out))
}

// buildScript finds tools/kube-apiserver/build.sh above the working directory
// (go test runs in the package's directory, somewhere in the main module).
func buildScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "tools", "kube-apiserver", "build.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("tools/kube-apiserver/build.sh not found above the working directory")
		}
		dir = parent
	}
}

func (s *Server) waitReady(timeout time.Duration) error {
	c := s.HTTPClient()
	c.Timeout = 5 * time.Second
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+s.Token)
		resp, err := c.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(body))
		} else {
			last = err.Error()
		}
		select {
		case <-s.exited:
			return fmt.Errorf("exited before ready (%v)", s.cmd.ProcessState)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %s", timeout, last)
		}
	}
}

// launch starts the apiserver process (its output appended to LogPath).
func (s *Server) launch() error {
	logFile, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	s.cmd = exec.Command(s.bin, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	// Killed if the test binary dies (a go test timeout, say) rather than
	// left running. The signal follows the thread that forked, so that
	// thread stays locked to a goroutine until the process exits.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.exited = make(chan struct{})
	startErr := make(chan error, 1)
	go func(cmd *exec.Cmd, exited chan struct{}) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(exited)
		defer logFile.Close()
		err := cmd.Start()
		startErr <- err
		if err == nil {
			_ = cmd.Wait()
		}
	}(s.cmd, s.exited)
	return <-startErr
}

// halt stops the running process: SIGTERM, then SIGKILL after 10 s.
func (s *Server) halt() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// Stop stops the apiserver: SIGTERM, then SIGKILL after 10 s (idempotent).
func (s *Server) Stop() {
	s.stop.Do(func() {
		s.clientOnce.Do(func() {})
		if s.client != nil {
			s.client.CloseIdleConnections()
		}
		s.halt()
	})
}

// Restart stops the apiserver and starts it again with the same flags,
// address, certificates and etcd (so the same data), and returns once it
// is ready: clients see their connections and watches cut.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.halt()
	began := time.Now()
	if err := s.launch(); err != nil {
		t.Fatalf("kube-apiserver restart: %v", err)
	}
	if err := s.waitReady(60 * time.Second); err != nil {
		s.dumpLog(t)
		t.Fatalf("kube-apiserver restart: %v", err)
	}
	t.Logf("kube-apiserver %s restarted in %v", s.URL, time.Since(began).Round(time.Millisecond))
}

func (s *Server) dumpLog(t testing.TB) {
	t.Helper()
	b, err := os.ReadFile(s.LogPath)
	if err != nil {
		t.Logf("kube-apiserver log: %v", err)
		return
	}
	const max = 64 << 10
	if len(b) > max {
		b = append([]byte("...\n"), b[len(b)-max:]...)
	}
	t.Logf("kube-apiserver log (%s):\n%s", s.LogPath, b)
}

// HTTPClient is a new http.Client that trusts the apiserver's CA. It sends no
// credentials: set "Authorization: Bearer "+s.Token, or add a client cert
// (ClientCert) to its *http.Transport's TLSClientConfig; or use Do.
func (s *Server) HTTPClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(s.caCert)
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
}

// Do sends a request as the admin user and returns the status and body. body
// may be nil, []byte, a string, or anything else (sent as JSON). A failure
// to get any answer fails the test.
func (s *Server) Do(t testing.TB, method, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	case string:
		r = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set("Accept", "application/json")
	if r != nil {
		ct := "application/json"
		if method == http.MethodPatch {
			ct = "application/merge-patch+json"
		}
		req.Header.Set("Content-Type", ct)
	}
	s.clientOnce.Do(func() { s.client = s.HTTPClient() })
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// ClientCert writes a client cert and key, signed by the apiserver's client
// CA, for user in groups (the cert's CN and O), e.g. "system:node:n1" in
// "system:nodes", or "system:serviceaccount:kube-system:calico-node".
func (s *Server) ClientCert(t testing.TB, user string, groups ...string) (certFile, keyFile string) {
	t.Helper()
	name := "client-" + randomHex(t, 4)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: user, Organization: groups},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return writeSigned(t, s.Dir, name, tmpl, s.caCert, s.caKey)
}

// KubeconfigFor writes a kubeconfig that authenticates as user in groups
// with a client cert (see ClientCert) and returns its path.
func (s *Server) KubeconfigFor(t testing.TB, user string, groups ...string) string {
	t.Helper()
	certFile, keyFile := s.ClientCert(t, user, groups...)
	cert, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimSuffix(certFile, ".pem") + ".kubeconfig"
	s.writeKubeconfig(t, path, user,
		"client-certificate-data: "+base64.StdEncoding.EncodeToString(cert)+
			"\n    client-key-data: "+base64.StdEncoding.EncodeToString(key))
	return path
}

func (s *Server) writeKubeconfig(t testing.TB, path, user, auth string) {
	t.Helper()
	ca, err := os.ReadFile(s.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %q
  user:
    %s
contexts:
- name: test
  context:
    cluster: test
    user: %q
current-context: test
`, s.URL, base64.StdEncoding.EncodeToString(ca), user, auth, user)
	writeFile(t, path, []byte(cfg))
}

// writeCerts makes a CA and a serving cert for 127.0.0.1 and localhost.
func (s *Server) writeCerts(t testing.TB) {
	t.Helper()
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "calico-aio kube-apiserver test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	key := ecKey(t)
	der, err := x509.CreateCertificate(rand.Reader, ca, ca, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if s.caCert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	s.caKey = key
	s.CAFile = filepath.Join(s.Dir, "ca.pem")
	writeFile(t, s.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))

	serving := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 96, 0, 1)},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	writeSigned(t, s.Dir, "serving", serving, s.caCert, s.caKey)
}

func writeSigned(t testing.TB, dir, name string, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certFile, keyFile string) {
	t.Helper()
	key := ecKey(t)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = filepath.Join(dir, name+".pem")
	keyFile = filepath.Join(dir, name+"-key.pem")
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return certFile, keyFile
}

// writeRSAKey writes the service-account signing key; kube-apiserver takes
// the public half from the same file.
func writeRSAKey(t testing.TB, path string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
}

func ecKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n.Add(n, big.NewInt(1))
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// freePort picks a free loopback TCP port (closed again for the apiserver).
func freePort(t testing.TB) int {
	t.Helper()
	port, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

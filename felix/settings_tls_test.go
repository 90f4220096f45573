package felix

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/internal/nstest"
	"github.com/calico-aio/calico-aio/store/api"
)

// testCA is a CA made for a test, issuing certificates into dir.
type testCA struct {
	t    *testing.T
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // the CA certificate, PEM
}

var testSerial int64

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	ca := &testCA{t: t, dir: dir}
	ca.cert, ca.key, ca.file, _ = ca.issue(name, &x509.Certificate{IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature})
	return ca
}

// issue writes a certificate (signed by ca, or self-signed while ca has
// none yet) and its key; it returns their files.
func (ca *testCA) issue(name string, tmpl *x509.Certificate) (*x509.Certificate, *ecdsa.PrivateKey, string, string) {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatal(err)
	}
	testSerial++
	tmpl.SerialNumber = big.NewInt(testSerial)
	tmpl.Subject = pkix.Name{CommonName: name}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	parent, signer := tmpl, key
	if ca.cert != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		ca.t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		ca.t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		ca.t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(ca.dir, name+".crt"), filepath.Join(ca.dir, name+".key")
	for f, b := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(f, pem.EncodeToMemory(b), 0o600); err != nil {
			ca.t.Fatal(err)
		}
	}
	return cert, key, certFile, keyFile
}

// pair issues a leaf certificate for use (server or client auth) and
// loads it.
func (ca *testCA) pair(name string, usage x509.ExtKeyUsage, ips ...net.IP) (tls.Certificate, string, string) {
	ca.t.Helper()
	_, _, c, k := ca.issue(name, &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		KeyUsage: x509.KeyUsageDigitalSignature})
	pair, err := tls.LoadX509KeyPair(c, k)
	if err != nil {
		ca.t.Fatal(err)
	}
	return pair, c, k
}

// httpsGetIn fetches path over TLS from addr inside n, trusting roots and
// presenting client (nil: none), and returns the status line and whether
// the body looked like metrics.
func httpsGetIn(n ns.NetNS, addr, path string, roots *x509.CertPool, client *tls.Certificate) (status string, err error) {
	err = n.Do(func(ns.NetNS) error {
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if client != nil {
			cfg.Certificates = []tls.Certificate{*client}
		}
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("GET " + path + " HTTP/1.0\r\nHost: x\r\n\r\n")); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		status = strings.TrimSpace(line)
		return err
	})
	return status, err
}

// TestSettingsMetricsTLSLive: in a namespace of its own, setting
// prometheusMetricsCertFile, KeyFile and CAFile while the agent runs makes
// the metrics endpoint HTTPS that serves only clients with a certificate
// from the CA (as Calico's); plain HTTP, no client certificate and one
// from another CA are refused; clearing them serves plain HTTP again. A
// partial set is refused at write, naming the missing fields, and a
// partial effective set (env plus datastore) keeps the server off.
func TestSettingsMetricsTLSLive(t *testing.T) {
	nstest.NeedKernel(t)
	n := nstest.NewNS(t)
	if err := n.Do(func(ns.NetNS) error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca, other := newTestCA(t, dir, "ca"), newTestCA(t, dir, "other-ca")
	_, serverCert, serverKey := ca.pair("server", x509.ExtKeyUsageServerAuth, net.ParseIP("127.0.0.1"))
	client, _, _ := ca.pair("client", x509.ExtKeyUsageClientAuth)
	stranger, _, _ := other.pair("stranger", x509.ExtKeyUsageClientAuth)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &agent{cfg: Config{NodeName: "n1"}, state: calc.NewState("n1"), overlay: calc.NewOverlay("n1"), health: &health{maxGap: time.Minute},
		metrics: newMetrics("n1", ""), settings: newSettingsLoader("n1", spec{})}
	if err := n.Do(func(ns.NetNS) error { return a.startServers(ctx) }); err != nil {
		t.Fatal(err)
	}
	defer func() { a.healthSrv.close(); a.metricsSrv.close() }()
	const addr = "127.0.0.1:9091"
	plain := func(what string, wantOK bool) {
		t.Helper()
		st, err := httpGetIn(n, addr, "/metrics")
		if ok := err == nil && strings.Contains(st, " 200"); ok != wantOK {
			t.Errorf("%s: plain HTTP got %q (%v), want served %v", what, st, err, wantOK)
		}
	}
	secure := func(what string, cert *tls.Certificate, wantOK bool) {
		t.Helper()
		st, err := httpsGetIn(n, addr, "/metrics", roots, cert)
		if ok := err == nil && strings.Contains(st, " 200"); ok != wantOK {
			t.Errorf("%s: HTTPS got %q (%v), want served %v", what, st, err, wantOK)
		}
	}
	fold := func(f *api.FelixConfiguration) {
		t.Helper()
		if err := n.Do(func(ns.NetNS) error { a.fold(felixUpdate(f, false)); return nil }); err != nil {
			t.Fatal(err)
		}
	}

	plain("no TLS files", true)
	secure("no TLS files", &client, false)

	f := fc(t, "default", "prometheusMetricsCertFile", `"`+serverCert+`"`)
	err := f.Validate()
	for _, field := range []string{"spec.prometheusMetricsKeyFile", "spec.prometheusMetricsCAFile"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("certificate file alone: validation %v, want an error naming %s", err, field)
		}
	}
	f.Spec.PrometheusMetricsKeyFile, f.Spec.PrometheusMetricsCAFile = serverKey, ca.file
	if err := f.Validate(); err != nil {
		t.Fatalf("all three files: %v", err)
	}
	fold(f)
	secure("TLS, client certificate from the CA", &client, true)
	secure("TLS, no client certificate", nil, false)
	secure("TLS, client certificate from another CA", &stranger, false)
	plain("TLS", false)

	// The environment can leave a partial set in effect: nothing is served.
	a.settings = newSettingsLoader("n1", spec{PrometheusMetricsCAFile: filepath.Join(dir, "missing.crt")})
	f2 := fc(t, "default", "prometheusMetricsCertFile", `"`+serverCert+`"`)
	fold(f2)
	secure("partial set (no key file)", &client, false)
	plain("partial set (no key file)", false)

	a.settings = newSettingsLoader("n1", spec{})
	fold(f)
	secure("TLS again", &client, true)
	fold(fc(t, "default", "prometheusMetricsEnabled", `true`))
	plain("TLS files cleared", true)
	secure("TLS files cleared", &client, false)
}

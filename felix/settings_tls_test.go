package felix

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/felix/health"
	"github.com/calico-aio/calico-aio/felix/metrics"
	"github.com/calico-aio/calico-aio/internal/nstest"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// loadPair loads a certificate and its key.
func loadPair(t *testing.T, cert, key string) tls.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// httpsGetIn fetches path over TLS from addr inside n, trusting roots and
// presenting client (nil: none), and returns the status line.
func httpsGetIn(n ns.NetNS, addr, path string, roots *x509.CertPool, client *tls.Certificate) (string, error) {
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if client != nil {
		cfg.Certificates = []tls.Certificate{*client}
	}
	return statusIn(n, path, func() (net.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	})
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
	caFile, serverCert, serverKey, clientCert, clientKey := storetest.WriteTestCerts(t, t.TempDir())
	_, _, _, strangerCert, strangerKey := storetest.WriteTestCerts(t, t.TempDir()) // another CA
	client, stranger := loadPair(t, clientCert, clientKey), loadPair(t, strangerCert, strangerKey)
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &agent{cfg: config.Config{NodeName: "n1"}, state: calc.NewState("n1"), overlay: calc.NewOverlay("n1"), health: health.New(time.Minute),
		metrics: metrics.New("n1", ""), settings: config.NewLoader("n1", spec{})}
	if err := n.Do(func(ns.NetNS) error { return a.startServers(ctx) }); err != nil {
		t.Fatal(err)
	}
	defer func() { a.healthSrv.Close(); a.metricsSrv.Close() }()
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
	err = f.Validate()
	for _, field := range []string{"spec.prometheusMetricsKeyFile", "spec.prometheusMetricsCAFile"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("certificate file alone: validation %v, want an error naming %s", err, field)
		}
	}
	f.Spec.PrometheusMetricsKeyFile, f.Spec.PrometheusMetricsCAFile = serverKey, caFile
	if err := f.Validate(); err != nil {
		t.Fatalf("all three files: %v", err)
	}
	fold(f)
	secure("TLS, client certificate from the CA", &client, true)
	secure("TLS, no client certificate", nil, false)
	secure("TLS, client certificate from another CA", &stranger, false)
	plain("TLS", false)

	// The environment can leave a partial set in effect: nothing is served.
	a.settings = config.NewLoader("n1", spec{PrometheusMetricsCAFile: filepath.Join(t.TempDir(), "missing.crt")})
	f2 := fc(t, "default", "prometheusMetricsCertFile", `"`+serverCert+`"`)
	fold(f2)
	secure("partial set (no key file)", &client, false)
	plain("partial set (no key file)", false)

	a.settings = config.NewLoader("n1", spec{})
	fold(f)
	secure("TLS again", &client, true)
	fold(fc(t, "default", "prometheusMetricsEnabled", `true`))
	plain("TLS files cleared", true)
	secure("TLS files cleared", &client, false)
}

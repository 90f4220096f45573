package etcdv3_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/embedded"
	"github.com/calico-aio/calico-aio/store/etcdv3"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// A short per-call timeout: the failing cases must fail within it.
const tlsTestTimeout = 2 * time.Second

// One TLS member with client-cert auth serves every case: who gets in, who
// is refused, and how fast.
func TestTLSClientCertAuth(t *testing.T) {
	dir := t.TempDir()
	ca, srvCert, srvKey, cliCert, cliKey := storetest.WriteTestCerts(t, dir)
	e := storetest.StartEtcdTLS(t, ca, srvCert, srvKey, true)
	ep := e.Endpoints()
	if !strings.HasPrefix(ep[0], "https://127.0.0.1:") {
		t.Fatalf("TLS member endpoint %q, want https://127.0.0.1:PORT", ep[0])
	}

	t.Run("CA and client cert can read and write", func(t *testing.T) {
		c := newClient(t, etcdv3.Config{Endpoints: ep, CAFile: ca, CertFile: cliCert, KeyFile: cliKey})
		roundTrip(t, c, "/tls/ok")
	})

	t.Run("failover from a dead https endpoint", func(t *testing.T) {
		dead := "https://" + strings.TrimPrefix(deadURL(t), "http://")
		c := newClient(t, etcdv3.Config{Endpoints: []string{dead, ep[0]}, CAFile: ca, CertFile: cliCert, KeyFile: cliKey})
		for i := range 5 {
			roundTrip(t, c, fmt.Sprintf("/tls/failover/%d", i))
		}
	})

	// Refusals run in parallel after the cases above: each waits out its
	// request timeout. Without our CA the server cert is checked against the
	// system roots (unknown authority); without a client cert, or with one
	// from another CA, the server ends the handshake.
	_, _, _, otherCert, otherKey := storetest.WriteTestCerts(t, t.TempDir())
	for name, cfg := range map[string]etcdv3.Config{
		"no CA file":                  {Endpoints: ep, CertFile: cliCert, KeyFile: cliKey},
		"no TLS config at all":        {Endpoints: ep},
		"CA but no client cert":       {Endpoints: ep, CAFile: ca},
		"client cert from another CA": {Endpoints: ep, CAFile: ca, CertFile: otherCert, KeyFile: otherKey},
	} {
		t.Run(name+" is refused", func(t *testing.T) {
			t.Parallel()
			failsWithinTimeout(t, newClient(t, cfg))
		})
	}
}

// A missing or broken TLS file is a config error from New that names the file,
// not a timeout on the first call.
func TestTLSBadFilesFailInNew(t *testing.T) {
	dir := t.TempDir()
	ca, _, _, cliCert, cliKey := storetest.WriteTestCerts(t, dir)
	missing := filepath.Join(dir, "no-such-file.pem")
	// file is what the error must name; "" only requires New to fail
	// (etcd's transport reports a malformed CA as "x509: malformed ..."
	// without the path).
	for name, tc := range map[string]struct {
		cfg  etcdv3.Config
		file string
	}{
		"missing CA":          {etcdv3.Config{CAFile: missing, CertFile: cliCert, KeyFile: cliKey}, missing},
		"missing CA only":     {etcdv3.Config{CAFile: missing}, missing},
		"missing client key":  {etcdv3.Config{CAFile: ca, CertFile: cliCert, KeyFile: missing}, missing},
		"CA file holds a key": {etcdv3.Config{CAFile: cliKey, CertFile: cliCert, KeyFile: cliKey}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			tc.cfg.Endpoints = []string{"https://127.0.0.1:1"}
			c, err := etcdv3.New(tc.cfg)
			if err == nil {
				c.Close()
				t.Fatal("New succeeded")
			}
			t.Logf("New: %v", err)
			if !strings.Contains(err.Error(), tc.file) {
				t.Errorf("error %q does not name %s", err, tc.file)
			}
		})
	}
}

// Client TLS options that do not fit together, or with the client URL's
// scheme, fail before etcd starts: etcd itself would serve plain http with
// certs set and only log a warning.
func TestEmbeddedTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key, _, _ := storetest.WriteTestCerts(t, dir)
	for name, tc := range map[string]struct {
		cfg  embedded.Config
		want string
	}{
		"certs with http URL":    {embedded.Config{ClientURL: "http://127.0.0.1:1", CertFile: cert, KeyFile: key}, "must be https"},
		"https URL with no cert": {embedded.Config{ClientURL: "https://127.0.0.1:1"}, "CertFile and KeyFile are not set"},
		"cert without key":       {embedded.Config{ClientURL: "https://127.0.0.1:1", CertFile: cert}, "set together"},
		"CA without cert":        {embedded.Config{TrustedCAFile: ca}, "need CertFile"},
		"client auth without CA": {embedded.Config{ClientURL: "https://127.0.0.1:1", CertFile: cert, KeyFile: key, ClientCertAuth: true}, "needs TrustedCAFile"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.cfg.DataDir = filepath.Join(dir, "data")
			s, err := embedded.Start(context.Background(), tc.cfg)
			if err == nil {
				s.Close()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to say %q", err, tc.want)
			}
		})
	}
}

// With a dead endpoint listed first the client fails over to the live one, and
// endpoint entries are trimmed, empty ones dropped.
func TestMultipleEndpointsFailOver(t *testing.T) {
	e := storetest.StartEtcd(t)
	live := e.Endpoints()[0]
	dead := deadURL(t)
	c := newClient(t, etcdv3.Config{Endpoints: []string{"  " + dead + " ", "", " \t", live + "\n"}})
	if got, want := c.Etcd().Endpoints(), []string{dead, live}; !slices.Equal(got, want) {
		t.Fatalf("client endpoints %q, want %q", got, want)
	}
	for i := range 10 {
		roundTrip(t, c, fmt.Sprintf("/multi/%d", i))
	}

	// The live member alone, listed last, behind two dead ones.
	c2 := newClient(t, etcdv3.Config{Endpoints: []string{deadURL(t), deadURL(t), live}})
	if _, err := c2.GetKey(context.Background(), "/multi/0"); err != nil {
		t.Fatalf("get via third endpoint: %v", err)
	}
}

func newClient(t *testing.T, cfg etcdv3.Config) *etcdv3.Backend {
	t.Helper()
	cfg.DialTimeout = tlsTestTimeout
	cfg.RequestTimeout = tlsTestTimeout
	c, err := etcdv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip creates key and reads it back.
func roundTrip(t *testing.T, c *etcdv3.Backend, key string) {
	t.Helper()
	ctx := context.Background()
	rev, err := c.CreateKey(ctx, key, []byte("v"))
	if err != nil {
		t.Fatalf("create %s: %v", key, err)
	}
	kv, err := c.GetKey(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if string(kv.Value) != "v" || kv.Revision != rev {
		t.Fatalf("get %s = %q at %d, want \"v\" at %d", key, kv.Value, kv.Revision, rev)
	}
}

// failsWithinTimeout checks that a read fails within the request timeout
// (plus slack) without reaching the data. The error is only "context deadline
// exceeded": etcd's client (clientv3.ContextError) replaces gRPC's "latest
// balancer error: ... x509: certificate signed by unknown authority" (or "tls:
// certificate required") with ctx.Err(), so the cause cannot be asserted here.
func failsWithinTimeout(t *testing.T, c *etcdv3.Backend) {
	t.Helper()
	start := time.Now()
	_, err := c.GetKey(context.Background(), "/tls/refused")
	elapsed := time.Since(start)
	if err == nil || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get = %v, want a connection failure", err)
	}
	if limit := tlsTestTimeout + time.Second; elapsed > limit {
		t.Fatalf("failing get took %v, want under %v", elapsed, limit)
	}
	t.Logf("refused in %v: %v", elapsed, err)
}

// deadURL is a loopback URL with nothing listening.
func deadURL(t *testing.T) string {
	t.Helper()
	u, err := embedded.FreeLoopbackURL()
	if err != nil {
		t.Fatal(err)
	}
	return u
}

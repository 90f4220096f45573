package store_test

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
		c := newClient(t, store.Config{Endpoints: ep, CAFile: ca, CertFile: cliCert, KeyFile: cliKey})
		roundTrip(t, c, "/tls/ok")
	})

	// Without our CA the server cert is checked against the system roots.
	for name, cfg := range map[string]store.Config{
		"no CA file":           {Endpoints: ep, CertFile: cliCert, KeyFile: cliKey},
		"no TLS config at all": {Endpoints: ep},
	} {
		t.Run(name+" fails: unknown authority", func(t *testing.T) {
			c := newClient(t, cfg)
			err := failsWithinTimeout(t, c)
			if !strings.Contains(err.Error(), "unknown authority") {
				t.Errorf("error %q does not name the unknown authority", err)
			}
		})
	}

	t.Run("CA but no client cert is refused", func(t *testing.T) {
		c := newClient(t, store.Config{Endpoints: ep, CAFile: ca})
		err := failsWithinTimeout(t, c)
		if !strings.Contains(err.Error(), "certificate required") && !strings.Contains(err.Error(), "bad certificate") {
			t.Errorf("error %q does not say a client certificate was required", err)
		}
	})

	t.Run("client cert from another CA is refused", func(t *testing.T) {
		_, _, _, otherCert, otherKey := storetest.WriteTestCerts(t, t.TempDir())
		c := newClient(t, store.Config{Endpoints: ep, CAFile: ca, CertFile: otherCert, KeyFile: otherKey})
		failsWithinTimeout(t, c)
	})

	t.Run("failover from a dead https endpoint", func(t *testing.T) {
		dead := "https://" + strings.TrimPrefix(deadURL(t), "http://")
		c := newClient(t, store.Config{Endpoints: []string{dead, ep[0]}, CAFile: ca, CertFile: cliCert, KeyFile: cliKey})
		for i := range 5 {
			roundTrip(t, c, fmt.Sprintf("/tls/failover/%d", i))
		}
	})
}

// A missing or broken TLS file is a config error from New that names the file,
// not a timeout on the first call.
func TestTLSBadFilesFailInNew(t *testing.T) {
	dir := t.TempDir()
	ca, _, _, cliCert, cliKey := storetest.WriteTestCerts(t, dir)
	missing := filepath.Join(dir, "no-such-ca.pem")
	for name, tc := range map[string]struct {
		cfg  store.Config
		file string
	}{
		"missing CA":         {store.Config{CAFile: missing, CertFile: cliCert, KeyFile: cliKey}, missing},
		"missing CA only":    {store.Config{CAFile: missing}, missing},
		"missing client key": {store.Config{CAFile: ca, CertFile: cliCert, KeyFile: missing}, missing},
		"CA file is not PEM": {store.Config{CAFile: cliKey, CertFile: cliCert, KeyFile: cliKey}, cliKey},
	} {
		t.Run(name, func(t *testing.T) {
			tc.cfg.Endpoints = []string{"https://127.0.0.1:1"}
			c, err := store.New(tc.cfg)
			if err == nil {
				c.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tc.file) {
				t.Errorf("error %q does not name %s", err, tc.file)
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
	c := newClient(t, store.Config{Endpoints: []string{"  " + dead + " ", "", " \t", live + "\n"}})
	if got, want := c.Etcd().Endpoints(), []string{dead, live}; !slices.Equal(got, want) {
		t.Fatalf("client endpoints %q, want %q", got, want)
	}
	for i := range 10 {
		roundTrip(t, c, fmt.Sprintf("/multi/%d", i))
	}

	// The live member alone, listed last, behind two dead ones.
	c2 := newClient(t, store.Config{Endpoints: []string{deadURL(t), deadURL(t), live}})
	if _, err := c2.Get(context.Background(), "/multi/0"); err != nil {
		t.Fatalf("get via third endpoint: %v", err)
	}
}

func newClient(t *testing.T, cfg store.Config) *store.Client {
	t.Helper()
	cfg.DialTimeout = tlsTestTimeout
	cfg.RequestTimeout = tlsTestTimeout
	c, err := store.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip creates key and reads it back.
func roundTrip(t *testing.T, c *store.Client, key string) {
	t.Helper()
	ctx := context.Background()
	rev, err := c.Create(ctx, key, []byte("v"))
	if err != nil {
		t.Fatalf("create %s: %v", key, err)
	}
	kv, err := c.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if string(kv.Value) != "v" || kv.Revision != rev {
		t.Fatalf("get %s = %q at %d, want \"v\" at %d", key, kv.Value, kv.Revision, rev)
	}
}

// failsWithinTimeout checks that a write and a read both fail, each within
// the request timeout (plus slack), and returns the read's error.
func failsWithinTimeout(t *testing.T, c *store.Client) error {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	_, werr := c.Create(ctx, "/tls/refused", []byte("x"))
	_, rerr := c.Get(ctx, "/tls/refused")
	elapsed := time.Since(start)
	if werr == nil || rerr == nil {
		t.Fatalf("create err %v, get err %v: want both to fail", werr, rerr)
	}
	if errors.Is(rerr, store.ErrNotFound) {
		t.Fatalf("get reached the server: %v", rerr)
	}
	if limit := 2*tlsTestTimeout + time.Second; elapsed > limit {
		t.Fatalf("two failing calls took %v, want under %v", elapsed, limit)
	}
	t.Logf("refused in %v: %v", elapsed, rerr)
	return rerr
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

// Package storetest starts a real embedded etcd for tests.
package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/embedded"
)

// Etcd is a running test member.
type Etcd struct {
	Config embedded.Config
	Server *embedded.Server
}

// StartEtcd starts an embedded etcd on free loopback ports with its data in a
// test temp dir; it is stopped when the test ends.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	return start(t, testConfig(t))
}

// StartEtcdTLS is StartEtcd serving clients over https with the given server
// cert and key (see WriteTestCerts). With clientCertAuth a client must present
// a cert signed by caFile.
func StartEtcdTLS(t testing.TB, caFile, certFile, keyFile string, clientCertAuth bool) *Etcd {
	t.Helper()
	c := testConfig(t)
	c.ClientURL = "https://" + strings.TrimPrefix(c.ClientURL, "http://")
	c.TrustedCAFile, c.CertFile, c.KeyFile, c.ClientCertAuth = caFile, certFile, keyFile, clientCertAuth
	return start(t, c)
}

func testConfig(t testing.TB) embedded.Config {
	t.Helper()
	cu, err := embedded.FreeLoopbackURL()
	if err != nil {
		t.Fatal(err)
	}
	pu, err := embedded.FreeLoopbackURL()
	if err != nil {
		t.Fatal(err)
	}
	return embedded.Config{Name: "test", DataDir: t.TempDir(), ClientURL: cu, PeerURL: pu, NoFsync: true}
}

func start(t testing.TB, c embedded.Config) *Etcd {
	t.Helper()
	e := &Etcd{Config: c}
	e.Restart(t)
	t.Cleanup(e.Stop)
	return e
}

// Restart (re)starts the member with its config (same data, same ports).
func (e *Etcd) Restart(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := embedded.Start(ctx, e.Config)
	if err != nil {
		t.Fatalf("embedded etcd: %v", err)
	}
	e.Server = s
}

// Stop stops the member (idempotent).
func (e *Etcd) Stop() {
	if e.Server != nil {
		e.Server.Close()
		e.Server = nil
	}
}

// Endpoints is the client URL list.
func (e *Etcd) Endpoints() []string { return []string{e.Config.ClientURL} }

// Client returns a store client for the member, closed when the test ends.
// It has no client TLS; a StartEtcdTLS member needs a store.Config with certs.
func (e *Etcd) Client(t testing.TB) *store.Client {
	t.Helper()
	c, err := store.New(store.Config{Endpoints: e.Endpoints(), RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Package storetest starts a real embedded etcd for tests.
package storetest

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/embedded"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// Etcd is a running test member.
type Etcd struct {
	Config embedded.Config
	Server *embedded.Server
	// Enter, when set, runs a function on a thread inside the network
	// namespace the member lives in (see StartEtcdIn).
	Enter func(func() error) error
}

// StartEtcd starts an embedded etcd on free loopback ports with its data in a
// test temp dir; it is stopped when the test ends.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	return start(t, &Etcd{Config: testConfig(t)})
}

// StartEtcdWith is StartEtcd with the member's config changed by set first
// (quota, upkeep, ...).
func StartEtcdWith(t testing.TB, set func(*embedded.Config)) *Etcd {
	t.Helper()
	c := testConfig(t)
	set(&c)
	return start(t, &Etcd{Config: c})
}

// StartEtcdTLS is StartEtcd serving clients over https with the given server
// cert and key (see WriteTestCerts). With clientCertAuth a client must present
// a cert signed by caFile.
func StartEtcdTLS(t testing.TB, caFile, certFile, keyFile string, clientCertAuth bool) *Etcd {
	t.Helper()
	c := testConfig(t)
	c.ClientURL = "https://" + strings.TrimPrefix(c.ClientURL, "http://")
	c.TrustedCAFile, c.CertFile, c.KeyFile, c.ClientCertAuth = caFile, certFile, keyFile, clientCertAuth
	return start(t, &Etcd{Config: c})
}

// StartEtcdIn starts a member inside another network namespace, listening
// for clients on ip (an address of that namespace): processes there reach it
// at Endpoints(), and Client dials into the namespace through enter.
func StartEtcdIn(t testing.TB, enter func(func() error) error, ip string) *Etcd {
	t.Helper()
	c := testConfig(t)
	c.ClientURL = "http://" + net.JoinHostPort(ip, portOf(t, c.ClientURL))
	return start(t, &Etcd{Config: c, Enter: enter})
}

func portOf(t testing.TB, u string) string {
	_, port, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://"))
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// dialer opens connections from inside the member's namespace.
func (e *Etcd) dialer() func(ctx context.Context, addr string) (net.Conn, error) {
	if e.Enter == nil {
		return nil
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		var conn net.Conn
		err := e.Enter(func() error {
			var d net.Dialer
			var err error
			conn, err = d.DialContext(ctx, "tcp", addr)
			return err
		})
		return conn, err
	}
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

// start starts a new member on c's loopback ports, or on fresh ones when
// another process took one of them between the pick and the bind.
func start(t testing.TB, e *Etcd) *Etcd {
	t.Helper()
	err := e.start()
	for try := 0; errors.Is(err, syscall.EADDRINUSE) && try < 3; try++ {
		fresh, c := testConfig(t), e.Config
		e.Config.ClientURL = strings.Replace(c.ClientURL, ":"+portOf(t, c.ClientURL), ":"+portOf(t, fresh.ClientURL), 1)
		e.Config.PeerURL, e.Config.DataDir = fresh.PeerURL, fresh.DataDir
		err = e.start()
	}
	if err != nil {
		t.Fatalf("embedded etcd: %v", err)
	}
	t.Cleanup(e.Stop)
	return e
}

// Restart (re)starts the member with its config (same data, same ports).
func (e *Etcd) Restart(t testing.TB) {
	t.Helper()
	if err := e.start(); err != nil {
		t.Fatalf("embedded etcd: %v", err)
	}
}

func (e *Etcd) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := func(f func() error) error { return f() }
	if e.Enter != nil {
		run = e.Enter
	}
	return run(func() error {
		s, err := embedded.Start(ctx, e.Config)
		e.Server = s
		return err
	})
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
	c, err := store.New(store.Config{Endpoints: e.Endpoints(), RequestTimeout: 10 * time.Second, Dialer: e.dialer()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Backend returns the etcd backend of a new client for the member (raw
// keys, Calico's layout), closed when the test ends.
func (e *Etcd) Backend(t testing.TB) *etcdv3.Backend {
	t.Helper()
	return Raw(t, e.Client(t))
}

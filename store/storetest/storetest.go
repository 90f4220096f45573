// Package storetest starts a real embedded etcd for tests.
package storetest

import (
	"context"
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
	cu, err := embedded.FreeLoopbackURL()
	if err != nil {
		t.Fatal(err)
	}
	pu, err := embedded.FreeLoopbackURL()
	if err != nil {
		t.Fatal(err)
	}
	e := &Etcd{Config: embedded.Config{Name: "test", DataDir: t.TempDir(), ClientURL: cu, PeerURL: pu, NoFsync: true}}
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
func (e *Etcd) Client(t testing.TB) *store.Client {
	t.Helper()
	c, err := store.New(store.Config{Endpoints: e.Endpoints(), RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

package etcdv3_test

import (
	"context"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/storetest"
)

// A client that sat idle through a long etcd outage answers promptly once
// etcd is back. gRPC's default reconnect backoff grows towards 120 s, which
// left such a client cut off for tens of seconds after the outage ended.
func TestIdleClientReconnectsPromptlyAfterOutage(t *testing.T) {
	e := storetest.StartEtcd(t)
	c := e.Backend(t)
	put(t, c, "/r/k", "v")
	e.Stop()
	time.Sleep(18 * time.Second) // long enough for the default backoff to reach ~10 s
	e.Restart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if _, err := c.GetKey(ctx, "/r/k"); err != nil {
		t.Fatalf("first call after the outage ended: %v", err)
	}
}

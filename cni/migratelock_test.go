package cni

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/apiconfig"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// On etcd, ADD and DEL are refused while `calicoctl datastore migrate
// lock` has ClusterInformation default say datastoreReady false, as
// Calico's plugin refuses them; a missing ClusterInformation is no lock,
// and with etcd unreachable ADD fails while DEL goes on.
func TestEtcdLockedRefusesAddAndDel(t *testing.T) {
	t.Parallel()
	etcd := storetest.StartEtcd(t)
	s := &session{ds: &apiconfig.Config{Type: apiconfig.EtcdV3}, cl: etcd.Client(t)}
	ctx := context.Background()
	for _, del := range []bool{false, true} {
		if err := s.etcdLocked(ctx, del); err != nil {
			t.Errorf("no ClusterInformation (del %v): %v", del, err)
		}
	}
	ci := clusterInfoKind.NewObject().(*api.ClusterInformation)
	ci.Metadata.Name = "default"
	ready := false
	ci.Spec.DatastoreReady = &ready
	if _, err := s.cl.CreateResource(ctx, ci); err != nil {
		t.Fatal(err)
	}
	for _, del := range []bool{false, true} {
		var e *types.Error
		if err := s.etcdLocked(ctx, del); !errors.As(err, &e) || e.Code != types.ErrInternal || e.Msg != msgNotReady {
			t.Errorf("locked (del %v): %v, want %q", del, err, msgNotReady)
		}
	}
	etcd.Stop()
	down, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := s.etcdLocked(down, false); err == nil {
		t.Errorf("ADD with etcd down: no error")
	}
	if err := s.etcdLocked(down, true); err != nil {
		t.Errorf("DEL with etcd down: %v, want it to go on", err)
	}
}

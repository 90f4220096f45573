package cni

import (
	"context"
	"errors"
	"log/slog"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// etcdLocked is, on etcd, the check kddReady makes on Kubernetes: Calico's
// plugin refuses ADD and DEL whatever its datastore while
// ClusterInformation default says the datastore is not ready, which is
// what `calicoctl datastore migrate lock` writes (an address handed out
// after the export would be lost in the move to Kubernetes and handed out
// again there). Unlike Calico's, a missing ClusterInformation is no
// refusal on etcd (one node works with no calico-node having written one),
// and a DEL goes on with the datastore down (its release is journaled).
func (s *session) etcdLocked(ctx context.Context, del bool) error {
	if s.kdd() {
		return nil
	}
	r, err := s.cl.GetResource(ctx, clusterInfoKind, "", "default")
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil && del:
		slog.Warn("datastore unavailable during DEL; ClusterInformation not checked", "err", err)
		return nil
	case err != nil:
		return types.NewError(types.ErrTryAgainLater, "error getting ClusterInformation from the datastore", err.Error())
	}
	if ready := r.(*api.ClusterInformation).Spec.DatastoreReady; ready != nil && !*ready {
		return types.NewError(types.ErrInternal, msgNotReady, "")
	}
	return nil
}

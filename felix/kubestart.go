package felix

import (
	"context"
	"net/netip"
	"time"

	"github.com/calico-aio/calico-aio/build/version"
	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/felix/node"
	"github.com/calico-aio/calico-aio/store"
)

// kubeNodeWait is how often calico-node looks again for its Kubernetes
// Node while it does not exist; kubeConditionCheck how often it checks that
// its NetworkUnavailable condition is still cleared.
const (
	kubeNodeWait       = 5 * time.Second
	kubeConditionCheck = 30 * time.Second
)

// KubeStartup does calico-node's start-up duties in a Kubernetes datastore
// (felix/node/kube.go, docs/BOOTSTRAP.md), in place of Run's etcd-mode
// ones from EnsureClusterInformation to Register: c is the store client on
// the Kubernetes backend, kc the Kubernetes client (a *k8s.Client on the
// same API server) for the Node's conditions, and clusterTypeEnv the
// CLUSTER_TYPE variable. It creates Calico's start-up
// objects, waits for this node's Kubernetes Node and registers on it, and
// clears the node's NetworkUnavailable condition, keeping it so until ctx
// ends; then it sets it True ("CalicoIsDown"). It returns the node's
// addresses and done, which blocks until that last write is over: defer it
// where ctx is cancelled before the process exits.
func KubeStartup(ctx context.Context, c *store.Client, kc node.NodeConditions, cfg config.Config, clusterTypeEnv string) (v4, v6 netip.Prefix, done func(), err error) {
	if err := retry(ctx, func() error {
		return node.KubeBootstrap(ctx, c, version.Version, clusterTypeEnv, cfg.DefaultPools)
	}); err != nil {
		return v4, v6, nil, err
	}
	if v4, v6, err = node.Addrs(cfg.IP, cfg.IPAutodetectionMethod, cfg.IP6, cfg.IP6AutodetectionMethod); err != nil {
		return v4, v6, nil, err
	}
	if err := node.RegisterKube(ctx, c, cfg.NodeName, v4, v6, cfg.ASNumber, kubeNodeWait); err != nil {
		return v4, v6, nil, err
	}
	if err := retry(ctx, func() error { return node.SetNetworkUp(ctx, kc, cfg.NodeName) }); err != nil {
		return v4, v6, nil, err
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		node.KeepNetworkUp(ctx, kc, cfg.NodeName, kubeConditionCheck)
	}()
	return v4, v6, func() { <-stopped }, nil
}

package felix

import (
	"context"
	"log/slog"

	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/apiconfig"
	"github.com/calico-aio/calico-aio/store/embedded"
)

// datastore is what openDatastore connected to: the store client, and
// either the embedded etcd it started (nil when etcd is external) or, on
// the Kubernetes datastore, the Kubernetes client the backend uses.
type datastore struct {
	c    *store.Client
	etcd *embedded.Server
	kube *k8s.Client // nil unless the datastore is kubernetes
	// cni is the client the CNI calls served by the agent use: c, but on
	// the Kubernetes datastore one of their own, with no client-side rate
	// limit shared with the agent's other requests
	// (apiconfig.OpenKubeUnlimited).
	cni *store.Client
}

// close closes the clients and then the embedded etcd, if any.
func (d *datastore) close() {
	_ = d.c.Close()
	if d.cni != d.c {
		_ = d.cni.Close()
	}
	if d.etcd != nil {
		d.etcd.Close()
	}
}

// openDatastore logs the datastore chosen (once, with its warnings),
// starts the embedded etcd when the choice is etcdv3 with no etcd
// configured (cfg.Datastore then names its URL), and connects through
// apiconfig.Open (apiconfig.OpenKube on the Kubernetes datastore, with a
// second client for the CNI calls). The caller closes what it returns.
func openDatastore(ctx context.Context, cfg config.Config) (*datastore, error) {
	slog.Info("datastore chosen", cfg.Datastore.LogAttrs()...)
	for _, w := range cfg.Datastore.Warnings {
		slog.Warn("datastore setting not used", "warning", w)
	}
	if cfg.Datastore.Type == apiconfig.Kubernetes {
		c, kc, err := apiconfig.OpenKube(cfg.Datastore, apiconfig.OSHost())
		if err != nil {
			return nil, err
		}
		cni, _, err := apiconfig.OpenKubeUnlimited(cfg.Datastore, apiconfig.OSHost())
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		return &datastore{c: c, kube: kc, cni: cni}, nil
	}
	var srv *embedded.Server
	if cfg.EmbeddedEtcd() {
		// Compaction, quota and defrag check take the package defaults
		// (5 min history, 2 GiB, hourly): see store/embedded/maintain.go.
		var err error
		if srv, err = embedded.Start(ctx, embedded.Config{DataDir: cfg.EtcdDataDir, ClientURL: cfg.EtcdClientURL, PeerURL: cfg.EtcdPeerURL}); err != nil {
			return nil, err
		}
		cfg.Datastore.Etcd.Endpoints = srv.Endpoints()
		slog.Info("embedded etcd serving", "client", cfg.EtcdClientURL, "data", cfg.EtcdDataDir,
			"compactionRetention", embedded.DefaultCompactionRetention, "quotaBytes", embedded.DefaultQuotaBackendBytes)
	}
	c, err := apiconfig.Open(cfg.Datastore, apiconfig.OSHost())
	if err != nil {
		if srv != nil {
			srv.Close()
		}
		return nil, err
	}
	return &datastore{c: c, etcd: srv, cni: c}, nil
}

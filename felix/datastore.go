package felix

import (
	"context"
	"log/slog"

	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/apiconfig"
	"github.com/calico-aio/calico-aio/store/embedded"
)

// openDatastore logs the datastore chosen (once, with its warnings),
// starts the embedded etcd when the choice is etcdv3 with no etcd
// configured (cfg.Datastore then names its URL), and connects through
// apiconfig.Open. The server, when started, is the caller's to close.
func openDatastore(ctx context.Context, cfg config.Config) (*store.Client, *embedded.Server, error) {
	slog.Info("datastore chosen", cfg.Datastore.LogAttrs()...)
	for _, w := range cfg.Datastore.Warnings {
		slog.Warn("datastore setting not used", "warning", w)
	}
	if err := apiconfig.RefuseKubernetes(cfg.Datastore, "calico-node"); err != nil {
		return nil, nil, err
	}
	var srv *embedded.Server
	if cfg.EmbeddedEtcd() {
		// Compaction, quota and defrag check take the package defaults
		// (5 min history, 2 GiB, hourly): see store/embedded/maintain.go.
		var err error
		if srv, err = embedded.Start(ctx, embedded.Config{DataDir: cfg.EtcdDataDir, ClientURL: cfg.EtcdClientURL, PeerURL: cfg.EtcdPeerURL}); err != nil {
			return nil, nil, err
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
		return nil, nil, err
	}
	return c, srv, nil
}

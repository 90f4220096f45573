package main

import (
	"context"
	"fmt"
	"log/slog"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/calico-aio/calico-aio/store/embedded"
)

// serveEtcd runs an etcd member for the apiserver (data under dir/etcd,
// peers on the client port + 1) until SIGTERM or SIGINT.
func serveEtcd(dir, clientURL string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	peer, err := embedded.FreeLoopbackURL()
	if err != nil {
		return err
	}
	srv, err := embedded.Start(ctx, embedded.Config{Name: "kube-apiserver", DataDir: filepath.Join(dir, "etcd"), ClientURL: clientURL, PeerURL: peer})
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer srv.Close()
	slog.Info("etcd serving the kube-apiserver", "client", clientURL)
	select {
	case <-ctx.Done():
		return nil
	case err := <-srv.Err():
		return fmt.Errorf("etcd: %w", err)
	}
}

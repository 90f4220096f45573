package felix

import (
	"context"
	"log/slog"
	"os"
	"strings"

	"github.com/calico-aio/calico-aio/libnetwork"
	"github.com/calico-aio/calico-aio/store"
)

// serveLibnetwork starts Docker's network and IPAM driver for this node on
// <socketDir>/calico.sock and calico-ipam.sock. It returns once the
// sockets listen; stop ends the driver and waits for it. Calico's
// environment variables tune it: CALICO_LIBNETWORK_IFPREFIX (container
// interface prefix, default cali), CALICO_LIBNETWORK_CREATE_PROFILES=false
// (no per-network profile) and DOCKER_HOST (where network names are
// looked up).
func serveLibnetwork(ctx context.Context, c *store.Client, node string, mtu int, socketDir string) (stop func(), err error) {
	srv, err := libnetwork.Listen(libnetwork.Config{
		Node: node, Store: c, SocketDir: socketDir, MTU: mtu,
		IfPrefix:   os.Getenv("CALICO_LIBNETWORK_IFPREFIX"),
		NoProfiles: strings.EqualFold(os.Getenv("CALICO_LIBNETWORK_CREATE_PROFILES"), "false"),
		DockerHost: os.Getenv("DOCKER_HOST"),
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx); err != nil {
			slog.Error("libnetwork driver stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}

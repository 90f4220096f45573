// Package felix is the node agent, calico-node: it keeps this node's kernel
// state (routes, neighbours, iptables, ipsets) equal to what the datastore
// says, and runs the embedded datastore when no etcd is configured.
package felix

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/calico-aio/calico-aio/build/sysmon"
	"github.com/calico-aio/calico-aio/build/version"
	"github.com/calico-aio/calico-aio/cni"
	"github.com/calico-aio/calico-aio/felix/cniserver"
	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/felix/hostiface"
	"github.com/calico-aio/calico-aio/felix/node"
	"github.com/calico-aio/calico-aio/felix/peering"
	"github.com/calico-aio/calico-aio/felix/syncer"
	"github.com/calico-aio/calico-aio/k8s/controller"
	"github.com/calico-aio/calico-aio/libnetwork"
	"github.com/calico-aio/calico-aio/store"
)

// Main runs calico-node until SIGTERM or SIGINT and returns the exit code.
func Main(args []string) int {
	cfg, err := config.Parse(args, os.Getenv, os.Environ())
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "calico-node:", err)
		return 2
	}
	cfg.Logs = config.InstallLogger(cfg.FelixEnv.LogSeverityScreen)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "calico-node:", err)
		return 1
	}
	return 0
}

// Run starts the agent and blocks until ctx ends.
func Run(ctx context.Context, cfg config.Config) error {
	slog.Info("calico-node starting", "version", version.Version, "node", cfg.NodeName)
	go relaxMonitor()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ds, err := openDatastore(ctx, cfg)
	if err != nil {
		return err
	}
	defer ds.close()
	c := ds.c
	v4, v6, done, err := startup(ctx, cfg, ds)
	if err != nil {
		return err
	}
	// The last Kubernetes Node condition is written before the client closes.
	defer func() { cancel(); done() }()
	mw := node.NewMTUWatch(c, cfg.NodeName, cfg.LibDir, cfg.MTU, cfg.FelixEnv) // <lib-dir>/mtu (felix/node/mtuwatch.go)
	var mtu int
	if err := retry(ctx, func() (err error) { mtu, err = mw.Update(ctx); return err }); err != nil {
		return err
	}
	ifaces := hostiface.NewWatch() // host interface changes, for the MTU and the agent's loop
	go ifaces.Run(ctx)
	go mw.Run(ctx, ifaces.Links)
	if err := node.WriteFiles(cfg.LibDir, cfg.NodeName, mtu); err != nil {
		return err
	}
	slog.Info("node registered", "node", cfg.NodeName, "ipv4", v4, "ipv6", v6)
	// CNI calls through the agent; the loop holds its apply while one is in flight (hold.go).
	busy := &cni.Busy{}
	stopCNI := cniserver.Serve(ctx, cfg.RunDir, &cni.Agent{Client: ds.cni, Node: cfg.NodeName, Datastore: cfg.Datastore, Busy: busy})
	defer stopCNI()
	if cfg.KubeControllers != "" {
		if err := startControllers(ctx, cfg, ds); err != nil {
			return err
		}
	}
	if cfg.Libnetwork {
		stop, err := serveLibnetwork(ctx, c, cfg.NodeName, mtu, cfg.LibnetworkSocketDir)
		if err != nil {
			return err
		}
		defer stop()
	}
	a := newAgent(cfg, c, v6.IsValid())
	a.cniBusy = busy
	a.ifaces = ifaces
	if ds.etcd != nil {
		a.health.WatchEmbeddedEtcd(ds.etcd)
		a.metrics.AddEmbeddedEtcd(ds.etcd)
	}
	if err := a.startServers(ctx); err != nil {
		return err
	}
	bgpCfg := peering.Config{NodeName: cfg.NodeName, RouterID: cfg.BGPRouterID, Port: cfg.BGPPort, Enabled: cfg.BGP}
	if cfg.BGP {
		a.bgp = peering.NewRunner(bgpCfg, v4, v6)
		a.bgp.AdoptKept(a.extraRoutes) // routes kept across a restart stay until peers re-send theirs
	}
	run := peering.NewRunner(bgpCfg, netip.Prefix{}, netip.Prefix{})
	if a.bgp != nil {
		run = a.bgp
	}
	if err := run.ServeStatus(ctx, cfg.RunDir); err != nil {
		return err
	}
	go syncer.Run(ctx, c, ds.kube, a.updates)
	slog.Info("calico-node running", "datastore", cfg.Datastore.Type)
	err = a.loop(ctx)
	a.dp.Close()
	slog.Info("calico-node stopping")
	return err
}

// startup does calico-node's start-up duties: on etcd, ClusterInformation,
// the default tiers and pools, then the Node; on the Kubernetes datastore,
// KubeStartup's. It returns the node's addresses and done, which waits for
// what start-up left running once ctx is cancelled.
func startup(ctx context.Context, cfg config.Config, ds *datastore) (v4, v6 netip.Prefix, done func(), err error) {
	if ds.kube != nil {
		return KubeStartup(ctx, ds.c, ds.kube, cfg, cfg.ClusterType)
	}
	c := ds.c
	if err := retry(ctx, func() error { return c.EnsureClusterInformation(ctx, version.Version) }); err != nil {
		return v4, v6, nil, err
	}
	if err := retry(ctx, func() error { return c.EnsureDefaultTiers(ctx) }); err != nil {
		return v4, v6, nil, err
	}
	if err := retry(ctx, func() error { return node.EnsureDefaultPools(ctx, c, cfg.DefaultPools) }); err != nil {
		return v4, v6, nil, err
	}
	if v4, v6, err = node.Addrs(cfg.IP, cfg.IPAutodetectionMethod, cfg.IP6, cfg.IP6AutodetectionMethod); err != nil {
		return v4, v6, nil, err
	}
	if err := node.Register(ctx, c, cfg.NodeName, cfg.K8sNodeRef, v4, v6, cfg.ASNumber); err != nil {
		return v4, v6, nil, err
	}
	return v4, v6, func() {}, nil
}

// startControllers starts the Kubernetes controllers (cfg.KubeControllers
// names their kubeconfig), elected among the nodes: on etcd by an etcd
// election, on the Kubernetes datastore by a coordination.k8s.io Lease,
// where they only collect garbage (controller.KDD).
func startControllers(ctx context.Context, cfg config.Config, ds *datastore) error {
	kc, err := controller.New(ds.c, cfg.KubeControllers)
	if err != nil {
		return fmt.Errorf("kube controllers: %w", err)
	}
	kc.LeakGracePeriod = cfg.KubeControllersLeakGracePeriod
	run := func() error { return controller.RunElected(ctx, ds.c, cfg.NodeName, kc) }
	if ds.kube != nil {
		kc.KDD = true
		run = func() error { return controller.RunLeaseElected(ctx, ds.kube, cfg.NodeName, kc) }
	}
	go func() {
		if err := run(); err != nil && ctx.Err() == nil {
			slog.Error("kube controllers stopped", "err", err)
		}
	}()
	return nil
}

// retry calls f until it succeeds or ctx ends, backing off up to 5 s.
func retry(ctx context.Context, f func() error) error {
	wait := 100 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		slog.Warn("datastore not ready, retrying", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

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

// relaxMonitor gives the Go runtime's monitor thread its timer slack
// (build/sysmon): about 1 ms of the agent's CPU per CNI call went to its
// 20 µs polls. Without CAP_SYS_NICE the agent runs as before.
func relaxMonitor() {
	tid, err := sysmon.Relax(sysmon.Slack)
	if err != nil {
		slog.Info("the Go runtime's monitor thread keeps its timer slack", "error", err)
		return
	}
	slog.Debug("timer slack set for the Go runtime's monitor thread", "thread", tid, "slack", sysmon.Slack)
}

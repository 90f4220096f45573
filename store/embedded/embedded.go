// Package embedded runs an in-process etcd member: the datastore of a
// single-node install with no external etcd, and of tests.
package embedded

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/calico-aio/calico-aio/internal/freeport"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Defaults as DESIGN.md section 4.
const (
	DefaultDataDir   = "/var/lib/calico/etcd"
	DefaultClientURL = "http://127.0.0.1:2379"
	DefaultPeerURL   = "http://127.0.0.1:2380"
)

// DefaultTLSClientURL is the default client URL when CertFile is set.
const DefaultTLSClientURL = "https://127.0.0.1:2379"

// Config of the embedded member.
type Config struct {
	Name      string // member name; default "calico"
	DataDir   string // default DefaultDataDir
	ClientURL string // default DefaultClientURL
	PeerURL   string // default DefaultPeerURL
	// NoFsync trades durability for speed (tests only).
	NoFsync bool
	// Logger receives etcd's logs; nil silences them below errors.
	Logger *zap.Logger

	// Client TLS (optional). With CertFile and KeyFile set, clients are
	// served over TLS and ClientURL must be https (the default becomes
	// DefaultTLSClientURL). TrustedCAFile verifies client certs; with
	// ClientCertAuth a client must present a cert signed by it.
	CertFile       string
	KeyFile        string
	TrustedCAFile  string
	ClientCertAuth bool

	// Storage upkeep (see maintain.go). Zero values take the defaults.
	//
	// CompactionRetention is the history kept: etcd's periodic
	// auto-compaction drops revisions older than this, compacting every
	// CompactionRetention (at most hourly). Negative turns compaction off.
	CompactionRetention time.Duration
	// QuotaBackendBytes is the database size at which etcd raises its
	// NOSPACE alarm and refuses writes. Must not be negative.
	QuotaBackendBytes int64
	// DefragCheckInterval is how often the defragmentation rule is
	// checked. Negative turns the check off.
	DefragCheckInterval time.Duration
	// DefragMinFreeBytes is the least reclaimable space worth a defrag.
	DefragMinFreeBytes int64
}

// clientTLS returns the client TLS info, or an error when the options do not fit
// together or with the client URL's scheme.
func (c Config) clientTLS(curl *url.URL) (transport.TLSInfo, error) {
	info := transport.TLSInfo{CertFile: c.CertFile, KeyFile: c.KeyFile, TrustedCAFile: c.TrustedCAFile, ClientCertAuth: c.ClientCertAuth}
	switch {
	case (c.CertFile == "") != (c.KeyFile == ""):
		return info, fmt.Errorf("embedded etcd TLS: CertFile and KeyFile must be set together")
	case c.CertFile == "" && (c.TrustedCAFile != "" || c.ClientCertAuth):
		return info, fmt.Errorf("embedded etcd TLS: TrustedCAFile and ClientCertAuth need CertFile and KeyFile")
	case c.ClientCertAuth && c.TrustedCAFile == "":
		return info, fmt.Errorf("embedded etcd TLS: ClientCertAuth needs TrustedCAFile")
	case c.CertFile != "" && curl.Scheme != "https":
		// etcd would otherwise serve plain http and only log a warning.
		return info, fmt.Errorf("embedded etcd TLS: client URL %q must be https when CertFile is set", c.ClientURL)
	case c.CertFile == "" && curl.Scheme == "https":
		return info, fmt.Errorf("embedded etcd: client URL %q is https but CertFile and KeyFile are not set", c.ClientURL)
	}
	return info, nil
}

// Server is a running member.
type Server struct {
	etcd      *embed.Etcd
	clientURL string
	upkeep    upkeep
	closed    sync.Once
}

// Start starts the member and waits until it serves clients or ctx ends.
func Start(ctx context.Context, c Config) (*Server, error) {
	if c.Name == "" {
		c.Name = "calico"
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.ClientURL == "" {
		c.ClientURL = DefaultClientURL
		if c.CertFile != "" {
			c.ClientURL = DefaultTLSClientURL
		}
	}
	if c.PeerURL == "" {
		c.PeerURL = DefaultPeerURL
	}
	if err := c.setUpkeepDefaults(); err != nil {
		return nil, err
	}
	curl, err := url.Parse(c.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd client URL %q: %w", c.ClientURL, err)
	}
	tlsInfo, err := c.clientTLS(curl)
	if err != nil {
		return nil, err
	}
	purl, err := url.Parse(c.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd peer URL %q: %w", c.PeerURL, err)
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded etcd data dir: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = c.Name
	cfg.Dir = c.DataDir
	cfg.ListenClientUrls = []url.URL{*curl}
	cfg.AdvertiseClientUrls = []url.URL{*curl}
	cfg.ClientTLSInfo = tlsInfo
	cfg.ListenPeerUrls = []url.URL{*purl}
	cfg.AdvertisePeerUrls = []url.URL{*purl}
	cfg.InitialCluster = cfg.InitialClusterFromName(c.Name)
	cfg.UnsafeNoFsync = c.NoFsync
	cfg.Metrics = "basic"
	if c.CompactionRetention > 0 {
		cfg.AutoCompactionMode = embed.CompactorModePeriodic
		cfg.AutoCompactionRetention = c.CompactionRetention.String()
	}
	cfg.QuotaBackendBytes = c.QuotaBackendBytes
	lg := c.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting embedded etcd (data %s, client %s): %w", c.DataDir, c.ClientURL, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd failed: %w", err)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("embedded etcd not ready: %w", ctx.Err())
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("embedded etcd not ready after 60s")
	}
	s := &Server{etcd: e, clientURL: c.ClientURL, upkeep: upkeep{quota: c.QuotaBackendBytes, minFree: c.DefragMinFreeBytes}}
	s.startUpkeep(c.DefragCheckInterval)
	return s, nil
}

// Endpoints are the client URLs to give the store client.
func (s *Server) Endpoints() []string { return []string{s.clientURL} }

// Err reports a fatal server error.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops the member; closing again does nothing.
func (s *Server) Close() {
	s.closed.Do(func() {
		s.stopUpkeep()
		s.etcd.Close()
	})
}

// FreeLoopbackURL returns an http URL on 127.0.0.1 with a port that was free
// a moment ago, below the ephemeral range (see freeport).
func FreeLoopbackURL() (string, error) {
	port, err := freeport.Loopback()
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// Package etcdv3 is the etcd v3 backend: Calico's key layout,
// compare-and-swap in transactions, a watch that resumes. It implements
// model.Backend over Calico's model (backend.go, keys.go); the raw-key
// calls in this file are for what is etcd-only in Calico too (Of).
package etcdv3

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"

	"github.com/calico-aio/calico-aio/store/model"
)

// reconnectBackoff bounds how long an idle connection waits between attempts
// to reach a member that went away. gRPC's default grows to 120 s, so a client
// that sat through a 20 s etcd outage could stay cut off for another 30 s after
// etcd was back; CNI calls and the agent's writes must not.
var reconnectBackoff = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
	MinConnectTimeout: 5 * time.Second,
}

// DefaultEndpoint is the embedded etcd's client URL.
const DefaultEndpoint = "http://127.0.0.1:2379"

// Config says how to reach etcd.
type Config struct {
	Endpoints      []string
	CAFile         string
	CertFile       string
	KeyFile        string
	DialTimeout    time.Duration // default 5s
	RequestTimeout time.Duration // per call; default 10s
	// Dialer, when set, opens the TCP connections (tests use it to reach an
	// etcd that listens inside another network namespace).
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
}

// KV is one raw key with its value and mod revision.
type KV struct {
	Key      string
	Value    []byte
	Revision int64
}

// Backend is the etcd v3 datastore. Every call has a timeout; every write
// is a transaction.
type Backend struct {
	etcd    *clientv3.Client
	timeout time.Duration
}

var _ model.Backend = (*Backend)(nil)

// New connects to etcd. It does not wait for the cluster to answer; the first
// call does, within its timeout.
func New(cfg Config) (*Backend, error) {
	if len(cfg.Endpoints) == 0 {
		cfg.Endpoints = []string{DefaultEndpoint}
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	var tlsCfg *tls.Config
	if cfg.CAFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" {
		info := transport.TLSInfo{TrustedCAFile: cfg.CAFile, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile}
		var err error
		if tlsCfg, err = info.ClientConfig(); err != nil {
			return nil, fmt.Errorf("etcd TLS config (ca %q, cert %q, key %q): %w", cfg.CAFile, cfg.CertFile, cfg.KeyFile, err)
		}
	}
	eps := make([]string, 0, len(cfg.Endpoints))
	for _, e := range cfg.Endpoints {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	dialOpts := []grpc.DialOption{grpc.WithConnectParams(reconnectBackoff),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(recvCodec{encoding.GetCodecV2(proto.Name)}))}
	if cfg.Dialer != nil {
		dialOpts = append(dialOpts, grpc.WithContextDialer(cfg.Dialer))
	}
	cli, err := clientv3.New(clientv3.Config{
		DialOptions: dialOpts,
		Endpoints:   eps,
		DialTimeout: cfg.DialTimeout,
		TLS:         tlsCfg,
		Logger:      zap.NewNop(),
		// Keep the connection checked so a dead member is noticed.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to etcd %v: %w", eps, err)
	}
	return &Backend{etcd: cli, timeout: cfg.RequestTimeout}, nil
}

// Close releases the connection.
func (c *Backend) Close() error { return c.etcd.Close() }

// Etcd is the raw client, for what is etcd-only (Of).
func (c *Backend) Etcd() *clientv3.Client { return c.etcd }

func (c *Backend) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, c.timeout)
}

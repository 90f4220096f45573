// Package store is the etcd v3 datastore client: Calico's key layout, JSON
// values, compare-and-swap writes, list and a watch that survives compaction
// and disconnects.
package store

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

// KV is one key with its value and mod revision.
type KV struct {
	Key      string
	Value    []byte
	Revision int64
}

// Client is a thin, typed layer over the etcd v3 client. Every call has a
// timeout; every write is a transaction.
type Client struct {
	etcd    *clientv3.Client
	timeout time.Duration
}

// New connects to etcd. It does not wait for the cluster to answer; the first
// call does, within its timeout.
func New(cfg Config) (*Client, error) {
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
	dialOpts := []grpc.DialOption{grpc.WithConnectParams(reconnectBackoff)}
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
	return &Client{etcd: cli, timeout: cfg.RequestTimeout}, nil
}

// Close releases the connection.
func (c *Client) Close() error { return c.etcd.Close() }

// Etcd exposes the raw client for multi-key transactions (IPAM).
func (c *Client) Etcd() *clientv3.Client { return c.etcd }

func (c *Client) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, c.timeout)
}

func unreachable(op, key string, err error) error {
	return fmt.Errorf("etcd %s %s: %w", op, key, err)
}

// Get reads one key.
func (c *Client) Get(ctx context.Context, key string) (KV, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.etcd.Get(ctx, key)
	if err != nil {
		return KV{}, unreachable("get", key, err)
	}
	if len(resp.Kvs) == 0 {
		return KV{}, &NotFoundError{Key: key}
	}
	kv := resp.Kvs[0]
	return KV{Key: key, Value: kv.Value, Revision: kv.ModRevision}, nil
}

// List reads every key under prefix, and the store revision of the read.
func (c *Client) List(ctx context.Context, prefix string) ([]KV, int64, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.etcd.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, unreachable("list", prefix, err)
	}
	out := make([]KV, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		out[i] = KV{Key: string(kv.Key), Value: kv.Value, Revision: kv.ModRevision}
	}
	return out, resp.Header.Revision, nil
}

// Create writes key only if it does not exist and returns the new revision.
func (c *Client) Create(ctx context.Context, key string, value []byte) (int64, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value))).
		Commit()
	if err != nil {
		return 0, unreachable("create", key, err)
	}
	if !resp.Succeeded {
		return 0, &AlreadyExistsError{Key: key}
	}
	return resp.Header.Revision, nil
}

// Update writes key only if its mod revision is still rev (compare-and-swap).
// A lost compare returns a *ConflictError carrying the current value.
func (c *Client) Update(ctx context.Context, key string, value []byte, rev int64) (int64, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(value))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return 0, unreachable("update", key, err)
	}
	if !resp.Succeeded {
		return 0, conflictFrom(key, rev, resp)
	}
	return resp.Header.Revision, nil
}

// Delete removes key if its mod revision is rev; rev 0 deletes whatever is there.
func (c *Client) Delete(ctx context.Context, key string, rev int64) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cmp := clientv3.Compare(clientv3.Version(key), ">", 0)
	if rev != 0 {
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", rev)
	}
	resp, err := c.etcd.Txn(ctx).If(cmp).Then(clientv3.OpDelete(key)).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return unreachable("delete", key, err)
	}
	if !resp.Succeeded {
		err := conflictFrom(key, rev, resp)
		if err.Current == nil {
			return &NotFoundError{Key: key}
		}
		return err
	}
	return nil
}

func conflictFrom(key string, rev int64, resp *clientv3.TxnResponse) *ConflictError {
	ce := &ConflictError{Key: key, Expected: rev}
	if len(resp.Responses) > 0 {
		if r := resp.Responses[0].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
			ce.Current = &KV{Key: key, Value: r.Kvs[0].Value, Revision: r.Kvs[0].ModRevision}
		}
	}
	return ce
}

// Compact compacts the store's history up to rev (used by tests and tools).
func (c *Client) Compact(ctx context.Context, rev int64) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	if _, err := c.etcd.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return fmt.Errorf("etcd compact to %d: %w", rev, err)
	}
	return nil
}

// Package store is the datastore client everything above it holds: Calico's
// resources (typed create, update, apply, get, list, delete with Calico's
// checks) and the model contract (Backend), over whichever backend New
// picks. It never speaks a backend's own forms (etcd keys, Txn, custom
// resources); what is etcd-only reaches the etcd backend through
// etcdv3.Of(c.Backend).
package store

import (
	"time"

	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// Config says how to reach the datastore (etcd v3 today).
type Config = etcdv3.Config

// DefaultEndpoint is the embedded etcd's client URL.
const DefaultEndpoint = etcdv3.DefaultEndpoint

// Client holds a Backend: its calls (Get, List, Create, Update, Delete,
// Watch, Commit) are the model's, and the resource helpers build on them.
type Client struct {
	Backend
}

// New connects to the datastore cfg names: an etcd v3 cluster. It does not
// wait for it to answer; the first call does, within its timeout.
func New(cfg Config) (*Client, error) {
	b, err := etcdv3.New(cfg)
	if err != nil {
		return nil, err
	}
	return NewClient(b), nil
}

// NewClient is a client over b.
func NewClient(b Backend) *Client { return &Client{Backend: b} }

// timeoutSetter is a backend that can hand out a view of itself with
// another per-call timeout over the same connection.
type timeoutSetter interface {
	WithTimeout(d time.Duration) Backend
}

// WithTimeout is a client over the same connection whose calls each time
// out after d (the agent serves CNI calls with the plugin's own per-call
// timeout, on its warm connection). Closing either closes both. A backend
// with no per-call timeout of its own is shared as is.
func (c *Client) WithTimeout(d time.Duration) *Client {
	if t, ok := c.Backend.(timeoutSetter); ok {
		return NewClient(t.WithTimeout(d))
	}
	return c
}

package etcdv3

import (
	"time"

	"github.com/calico-aio/calico-aio/store/model"
)

// WithTimeout is a backend over the same etcd connection whose calls each
// time out after d (the agent serves CNI calls with the plugin's own
// per-call timeout, on its warm connection). Closing either closes both.
func (c *Backend) WithTimeout(d time.Duration) model.Backend {
	return &Backend{etcd: c.etcd, timeout: d}
}

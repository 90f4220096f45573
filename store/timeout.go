package store

import "time"

// WithTimeout is a client over the same etcd connection whose calls each
// time out after d (the agent serves CNI calls with the plugin's own
// per-call timeout, on its warm connection). Closing either closes both.
func (c *Client) WithTimeout(d time.Duration) *Client {
	return &Client{etcd: c.etcd, timeout: d}
}

package apiconfig

import (
	"errors"
	"fmt"

	"github.com/calico-aio/calico-aio/store"
)

// ErrKubernetesNotWired: the Kubernetes datastore was chosen but this build
// has no backend for it yet (errors.Is).
var ErrKubernetesNotWired = errors.New("the Kubernetes datastore backend is not wired yet")

// Open connects to the datastore c chose: the etcd v3 client for etcdv3.
// It is the one place a backend is picked from a Config (calico-node, the
// CNI plugins and calicoctl all come here); unlike the rest of the package
// it makes a client, though it contacts nothing (the first call does).
// Callers set c.Etcd's timeouts first.
func Open(c *Config, h Host) (*store.Client, error) {
	switch c.Type {
	case EtcdV3:
		return store.New(c.Etcd)
	case Kubernetes:
		// LEAD: the Kubernetes backend's constructor goes here, once
		// store/kube lands: c.RESTConfig(h) gives its client-go config
		// (errors already name the setting's source), then
		// store.NewClient(<the backend>).
		_ = h
		return nil, fmt.Errorf("datastore type kubernetes (%s): %w; "+
			"use DATASTORE_TYPE=etcdv3 with etcd endpoints (ETCD_ENDPOINTS, etcd_endpoints or spec.etcdEndpoints) naming your etcd cluster",
			c.Source(KeyDatastoreType), ErrKubernetesNotWired)
	}
	return nil, fmt.Errorf("datastore type %q (%s): unknown", c.Type, c.Source(KeyDatastoreType))
}

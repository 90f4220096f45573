package apiconfig

import (
	"fmt"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/kube"
)

// Open connects to the datastore c chose: the etcd v3 client for etcdv3,
// the Kubernetes backend (store/kube) for kubernetes.
// It is the one place a backend is picked from a Config (calico-node, the
// CNI plugins and calicoctl all come here); unlike the rest of the package
// it makes a client, though it contacts nothing (the first call does).
// Callers set c.Etcd's timeouts first.
func Open(c *Config, h Host) (*store.Client, error) {
	switch c.Type {
	case EtcdV3:
		return store.New(c.Etcd)
	case Kubernetes:
		sc, _, err := OpenKube(c, h)
		return sc, err
	}
	return nil, fmt.Errorf("datastore type %q (%s): unknown", c.Type, c.Source(KeyDatastoreType))
}

// OpenKube is Open for the Kubernetes datastore that also hands out the
// Kubernetes client the backend uses, for what calico-node reads and
// writes in Kubernetes itself (its Node's conditions, the Lease,
// NetworkPolicies, EndpointSlices): one client, one API server. The
// backend uses the CRD group c.APIGroup names or, with none, the one its
// first call discovers. It refuses a Config of another type.
func OpenKube(c *Config, h Host) (*store.Client, *k8s.Client, error) {
	return openKube(c, h, false)
}

// OpenKubeUnlimited is OpenKube without client-go's client-side rate limit
// (the API server's own priority and fairness still applies), for the CNI
// calls calico-node serves: in-process, each call is a process, and so a
// rate limiter, of its own, as Calico's plugin is; one limiter shared by
// every pod of the node would hold a burst of pods to its rate (about 10
// requests per ADD against the agent's 50 per second). A k8sClientQPS the
// user set still applies.
func OpenKubeUnlimited(c *Config, h Host) (*store.Client, *k8s.Client, error) {
	return openKube(c, h, true)
}

func openKube(c *Config, h Host, unlimited bool) (*store.Client, *k8s.Client, error) {
	if c.Type != Kubernetes {
		return nil, nil, fmt.Errorf("datastore type %q (%s): not kubernetes", c.Type, c.Source(KeyDatastoreType))
	}
	rc, err := c.RESTConfig(h)
	if err != nil {
		return nil, nil, err
	}
	if unlimited && rc.QPS == 0 {
		rc.QPS = -1 // client-go makes no rate limiter
	}
	kc, err := k8s.NewClientFromConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	return store.NewClient(kube.NewWithGroup(kc, c.APIGroup)), kc, nil
}

package kube_test

import (
	"testing"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// The backend contract's conformance suite, the one the etcd backend runs
// (store/etcdv3), on a real kube-apiserver with our CRDs. The watch cache is
// off so a watch can resume across a restart from etcd's history (watch_test.go
// shows what a lone restarted server with its cache does instead).
func TestBackendConformance(t *testing.T) {
	t.Parallel()
	storetest.RunBackendConformance(t, func(t *testing.T) storetest.Subject {
		c := startCluster(t, kubeapi.WithArgs("--watch-cache=false"))
		c.namespace(t, "ns1")
		c.namespace(t, "ns2")
		return storetest.Subject{Backend: c.b, Restart: func(t testing.TB) { c.kapi.Restart(t) }}
	})
}

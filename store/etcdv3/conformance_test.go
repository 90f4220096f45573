package etcdv3_test

import (
	"testing"

	"github.com/calico-aio/calico-aio/store/storetest"
)

// The etcd backend meets the datastore contract on a real embedded etcd.
func TestBackendConformance(t *testing.T) {
	storetest.RunBackendConformance(t, func(t *testing.T) storetest.Subject {
		e := storetest.StartEtcd(t)
		return storetest.Subject{Backend: e.Client(t).Backend, Restart: func(t testing.TB) { e.Stop(); e.Restart(t) }}
	})
}

// The conformance suite's non-atomic branch: writes one at a time, as the
// Kubernetes backend commits them, over the etcd backend.
func TestNonAtomicCommitConformance(t *testing.T) {
	storetest.RunBackendConformance(t, func(t *testing.T) storetest.Subject {
		e := storetest.StartEtcd(t)
		return storetest.Subject{Backend: &storetest.NonAtomic{Backend: e.Client(t).Backend}}
	})
}

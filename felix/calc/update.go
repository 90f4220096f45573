// Package calc is the agent's pure calculation step: datastore updates in,
// desired dataplane state out. No goroutines, no I/O.
package calc

import (
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// KindBlock marks IPAM block updates; resource updates use the plural.
const KindBlock = "blocks"

// KindService marks a Service's published endpoints (etcdv3.ServicePrefix).
const KindService = "services"

// Update is one change from the syncer.
type Update struct {
	Kind     string // resource plural ("workloadendpoints", ...) or KindBlock
	Key      string // datastore key
	Deleted  bool
	Resource api.Resource // set for resources unless Deleted
	Block    *ipam.Block  // set for blocks unless Deleted
	// Service is set for KindService unless Deleted.
	Service *store.ServiceEndpoints
	// InSync marks the end of the initial list of every watched prefix.
	InSync bool
}

// UpdateKey is the Key of an update about object k: Calico's path for it
// (".../<plural>/[<namespace>/]<name>", ".../block/<cidr>"), whose last
// segment the calculation reads as the name. It names the object only;
// nothing reads a datastore by it. False for a key no path names.
func UpdateKey(k store.Key) (string, bool) {
	key, err := etcdv3.EtcdKey(k)
	return key, err == nil
}

// ResourceUpdateKey is UpdateKey of the object name of kind k (in namespace
// ns when the kind is namespaced).
func ResourceUpdateKey(k api.KindInfo, ns, name string) string {
	key, _ := UpdateKey(store.ResourceKey(k, ns, name))
	return key
}

package etcdv3

import "github.com/calico-aio/calico-aio/store/model"

// Of is the etcd backend behind b, for what lives in etcd only, in Calico
// too: felix status reports under /calico/felix/v2/, the controller's
// election, libnetwork's Docker data, the Service endpoint copies under
// /calico/aio/v1/services/, compaction, calicoctl diags' raw key dumps.
// Nothing else may reach past the model. False when b is another backend
// (the caller refuses or skips the etcd-only feature).
func Of(b model.Backend) (*Backend, bool) {
	e, ok := b.(*Backend)
	return e, ok
}

package config

import (
	"fmt"

	"github.com/calico-aio/calico-aio/store/apiconfig"
)

// Datastore selection is store/apiconfig's FromEnv, as Calico's calico-node
// chooses: DATASTORE_TYPE (etcdv3 | kubernetes), the etcd and Kubernetes
// variables, Felix's own FELIX_DATASTORETYPE and FELIX_ETCD*, then the
// --etcd-* flags. With etcdv3 and no etcd listed or discovered the agent
// runs the embedded etcd; in a Kubernetes pod with no etcd configured the
// default is the Kubernetes datastore (apiconfig.Open refuses it until its
// backend is wired in), never a private embedded etcd per node, which
// would hand out the same pod addresses on every node.

// felixDatastoreEnv are Felix's datastore variables: apiconfig reads them,
// so the FELIX_* settings loader leaves them alone.
var felixDatastoreEnv = []string{"FELIX_DATASTORETYPE", "FELIX_ETCDENDPOINTS", "FELIX_ETCDADDR", "FELIX_ETCDSCHEME",
	"FELIX_ETCDKEYFILE", "FELIX_ETCDCERTFILE", "FELIX_ETCDCAFILE"}

// etcdFlags are the --etcd-* flags as given (empty: not given, so the
// environment's value stands).
type etcdFlags struct {
	endpoints, caFile, certFile, keyFile string
}

// chooseDatastore resolves the datastore from the environment and flags.
func chooseDatastore(getenv func(string) string, f etcdFlags) (*apiconfig.Config, error) {
	h := apiconfig.OSHost()
	h.Getenv = getenv
	return apiconfig.FromEnv(h, apiconfig.EtcdFlags{Endpoints: f.endpoints, CAFile: f.caFile, CertFile: f.certFile, KeyFile: f.keyFile})
}

// EmbeddedEtcd says whether the agent runs the embedded etcd: the
// datastore is etcdv3 and no etcd endpoints were listed or discovered.
func (c Config) EmbeddedEtcd() bool {
	d := c.Datastore
	return d != nil && d.Type == apiconfig.EtcdV3 &&
		d.Source(apiconfig.KeyEtcdEndpoints) == apiconfig.SourceDefault && d.Source(apiconfig.KeyEtcdDiscoverySrv) == apiconfig.SourceDefault
}

// checkEtcdOnly refuses what lives in etcd only, as in Calico: Docker's
// libnetwork endpoints, with the Kubernetes datastore.
func (c Config) checkEtcdOnly() error {
	if c.Libnetwork && c.Datastore.Type == apiconfig.Kubernetes {
		return fmt.Errorf("--libnetwork (CALICO_LIBNETWORK_ENABLED): Docker's network and IPAM driver keeps its endpoints in etcd only, "+
			"as in Calico; it is not available with the Kubernetes datastore (datastore type kubernetes from %s)", c.Datastore.Source(apiconfig.KeyDatastoreType))
	}
	return nil
}

package ctl

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/calico-aio/calico-aio/store/apiconfig"
)

// datastoreFlags are the global flags every datastore command takes.
type datastoreFlags struct {
	config    string
	endpoints string
	caFile    string
	certFile  string
	keyFile   string
	timeout   time.Duration
}

func (d *datastoreFlags) register(fs *pflag.FlagSet) {
	fs.StringVarP(&d.config, "config", "c", apiconfig.DefaultConfigPath, "path to the CalicoAPIConfig file (when it exists, the environment is not read)")
	fs.StringVar(&d.endpoints, "etcd-endpoints", "", "comma-separated etcd endpoints (overrides the config file or ETCD_ENDPOINTS)")
	fs.StringVar(&d.caFile, "etcd-ca-cert-file", "", "etcd CA certificate file")
	fs.StringVar(&d.certFile, "etcd-cert-file", "", "etcd client certificate file")
	fs.StringVar(&d.keyFile, "etcd-key-file", "", "etcd client key file")
	fs.DurationVar(&d.timeout, "timeout", 5*time.Second, "timeout of each datastore call")
}

// datastore resolves the datastore as Calico's calicoctl does
// (apiconfig.FromCalicoctl): the config file when it exists, else the
// environment; the --etcd-* flags override either. Each call times out
// after --timeout.
func (d *datastoreFlags) datastore(getenv func(string) string) (*apiconfig.Config, error) {
	h := apiconfig.OSHost()
	h.Getenv = getenv
	cfg, err := apiconfig.FromCalicoctl(h, d.config, apiconfig.EtcdFlags{Endpoints: d.endpoints, CAFile: d.caFile, CertFile: d.certFile, KeyFile: d.keyFile})
	if err != nil {
		return nil, err
	}
	cfg.Etcd.DialTimeout, cfg.Etcd.RequestTimeout = d.timeout, d.timeout
	return cfg, nil
}

// etcdOnly refuses a classic verb whose objects live in etcd only, as in
// Calico (Docker's and calicoctl's container endpoints, the classic profile
// verbs), when the datastore is kubernetes.
func etcdOnly(verb string, cfg *apiconfig.Config) error {
	if cfg.Type != apiconfig.Kubernetes {
		return nil
	}
	return fmt.Errorf("calicoctl %s: not available with the Kubernetes datastore (datastore type kubernetes from %s): "+
		"these classic verbs keep their endpoints and profiles in etcd only, as in Calico; use an etcdv3 datastore",
		verb, cfg.Source(apiconfig.KeyDatastoreType))
}

package ctl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/calico-aio/calico-aio/store"
)

// DefaultConfigPath is where calicoctl looks for its datastore config.
const DefaultConfigPath = "/etc/calico/calicoctl.cfg"

// apiConfig is the CalicoAPIConfig file format.
type apiConfig struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Spec       struct {
		DatastoreType  string `json:"datastoreType"`
		EtcdEndpoints  string `json:"etcdEndpoints"`
		EtcdKeyFile    string `json:"etcdKeyFile"`
		EtcdCertFile   string `json:"etcdCertFile"`
		EtcdCACertFile string `json:"etcdCACertFile"`
	} `json:"spec"`
}

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
	fs.StringVarP(&d.config, "config", "c", DefaultConfigPath, "path to the CalicoAPIConfig file")
	fs.StringVar(&d.endpoints, "etcd-endpoints", "", "comma-separated etcd endpoints (overrides ETCD_ENDPOINTS and the config file)")
	fs.StringVar(&d.caFile, "etcd-ca-cert-file", "", "etcd CA certificate file")
	fs.StringVar(&d.certFile, "etcd-cert-file", "", "etcd client certificate file")
	fs.StringVar(&d.keyFile, "etcd-key-file", "", "etcd client key file")
	fs.DurationVar(&d.timeout, "timeout", 5*time.Second, "timeout of each datastore call")
}

// storeConfig resolves the datastore config: flags, then environment, then
// the config file, then the default endpoint.
func (d *datastoreFlags) storeConfig(getenv func(string) string) (store.Config, error) {
	var file apiConfig
	if d.config != "" {
		data, err := os.ReadFile(d.config)
		switch {
		case err == nil:
			if err := yaml.Unmarshal(data, &file); err != nil {
				return store.Config{}, fmt.Errorf("config file %s: %w", d.config, err)
			}
			if file.Kind != "" && file.Kind != "CalicoAPIConfig" {
				return store.Config{}, fmt.Errorf("config file %s: kind %q, want CalicoAPIConfig", d.config, file.Kind)
			}
		case errors.Is(err, fs.ErrNotExist) && d.config == DefaultConfigPath:
			// No config file is fine.
		default:
			return store.Config{}, fmt.Errorf("config file: %w", err)
		}
	}
	pick := func(flag, env, fromFile string) string {
		if flag != "" {
			return flag
		}
		if v := getenv(env); v != "" {
			return v
		}
		return fromFile
	}
	dsType := pick("", "DATASTORE_TYPE", file.Spec.DatastoreType)
	switch dsType {
	case "", "etcdv3":
	case "kubernetes":
		return store.Config{}, fmt.Errorf("datastore type \"kubernetes\" (DATASTORE_TYPE or datastoreType): the Kubernetes datastore is not supported yet; use etcdv3 with ETCD_ENDPOINTS")
	default:
		return store.Config{}, fmt.Errorf("datastore type %q (DATASTORE_TYPE or datastoreType): must be etcdv3 or kubernetes", dsType)
	}
	cfg := store.Config{
		CAFile:         pick(d.caFile, "ETCD_CA_CERT_FILE", file.Spec.EtcdCACertFile),
		CertFile:       pick(d.certFile, "ETCD_CERT_FILE", file.Spec.EtcdCertFile),
		KeyFile:        pick(d.keyFile, "ETCD_KEY_FILE", file.Spec.EtcdKeyFile),
		DialTimeout:    d.timeout,
		RequestTimeout: d.timeout,
	}
	eps := pick(d.endpoints, "ETCD_ENDPOINTS", file.Spec.EtcdEndpoints)
	if eps == "" {
		eps = store.DefaultEndpoint
	}
	for _, e := range strings.Split(eps, ",") {
		if e = strings.TrimSpace(e); e != "" {
			cfg.Endpoints = append(cfg.Endpoints, e)
		}
	}
	return cfg, nil
}

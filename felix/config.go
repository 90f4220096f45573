// Package felix is the node agent, calico-node: it keeps this node's kernel
// state (routes, neighbours, iptables, ipsets) equal to what the datastore
// says, and runs the embedded datastore when no etcd is configured.
package felix

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/embedded"
)

// Config is the agent's start-up configuration (flags, then environment).
type Config struct {
	NodeName      string
	EtcdEndpoints []string
	EtcdCAFile    string
	EtcdCertFile  string
	EtcdKeyFile   string
	// Embedded datastore, used when EtcdEndpoints is empty.
	EtcdDataDir   string
	EtcdClientURL string
	EtcdPeerURL   string
}

// StoreConfig is how the agent's datastore client connects.
func (c Config) StoreConfig() store.Config {
	return store.Config{Endpoints: c.EtcdEndpoints, CAFile: c.EtcdCAFile, CertFile: c.EtcdCertFile, KeyFile: c.EtcdKeyFile}
}

// ParseFlags reads the agent's flags; every flag has an environment
// variable used when the flag is not given.
func ParseFlags(args []string, getenv func(string) string) (Config, error) {
	var c Config
	var endpoints string
	fs := pflag.NewFlagSet("calico-node", pflag.ContinueOnError)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	host, _ := os.Hostname()
	fs.StringVar(&c.NodeName, "nodename", env("NODENAME", host), "this node's name [NODENAME]")
	fs.StringVar(&endpoints, "etcd-endpoints", env("ETCD_ENDPOINTS", ""), "comma-separated etcd endpoints; empty runs the embedded etcd [ETCD_ENDPOINTS]")
	fs.StringVar(&c.EtcdCAFile, "etcd-ca-cert-file", env("ETCD_CA_CERT_FILE", ""), "etcd CA certificate [ETCD_CA_CERT_FILE]")
	fs.StringVar(&c.EtcdCertFile, "etcd-cert-file", env("ETCD_CERT_FILE", ""), "etcd client certificate [ETCD_CERT_FILE]")
	fs.StringVar(&c.EtcdKeyFile, "etcd-key-file", env("ETCD_KEY_FILE", ""), "etcd client key [ETCD_KEY_FILE]")
	fs.StringVar(&c.EtcdDataDir, "etcd-data-dir", env("CALICO_ETCD_DATA_DIR", embedded.DefaultDataDir), "embedded etcd data directory [CALICO_ETCD_DATA_DIR]")
	fs.StringVar(&c.EtcdClientURL, "etcd-client-url", env("CALICO_ETCD_CLIENT_URL", embedded.DefaultClientURL), "embedded etcd client URL [CALICO_ETCD_CLIENT_URL]")
	fs.StringVar(&c.EtcdPeerURL, "etcd-peer-url", env("CALICO_ETCD_PEER_URL", embedded.DefaultPeerURL), "embedded etcd peer URL [CALICO_ETCD_PEER_URL]")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	for _, e := range strings.Split(endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			c.EtcdEndpoints = append(c.EtcdEndpoints, e)
		}
	}
	if c.NodeName == "" {
		return c, fmt.Errorf("--nodename: no node name given and the hostname is empty")
	}
	return c, nil
}

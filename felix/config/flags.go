package config

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/calico-aio/calico-aio/felix/peering"
	"github.com/calico-aio/calico-aio/k8s/controller"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/apiconfig"
	"github.com/calico-aio/calico-aio/store/embedded"
)

// Config is the agent's start-up configuration (flags, then environment).
type Config struct {
	NodeName string
	// Datastore is the datastore chosen (datastore.go); apiconfig.Open
	// connects to it.
	Datastore *apiconfig.Config
	// Embedded datastore, used when EmbeddedEtcd says so.
	EtcdDataDir   string
	EtcdClientURL string
	EtcdPeerURL   string

	// Node identity and addresses.
	IP, IP6                 string // "autodetect" (default for IPv4), "none", or an address/prefix
	IPAutodetectionMethod   string
	IP6AutodetectionMethod  string
	ASNumber                uint32
	MTU                     int    // --mtu, FELIX_MTU: the pod MTU, 0 detects it (felix/node/mtu.go)
	LibDir, RunDir          string // /var/lib/calico, /var/run/calico
	HealthAddr, MetricsAddr string // "" disables, when set (servers.go)
	// HealthAddrSet and MetricsAddrSet: the flag or its variable was given.
	HealthAddrSet, MetricsAddrSet bool
	ResyncInterval                time.Duration
	BGP                           bool // run the embedded BGP speaker
	BGPPort                       int
	BGPSecretsDir                 string // BGP passwords: <dir>/<secret>/<key>
	BGPRouterID                   string // "", an IPv4 address or "hash" (felix/peering/routerid.go)
	LogLevel                      string
	Libnetwork                    bool   // serve Docker's network and IPAM driver
	LibnetworkSocketDir           string // where Docker looks for plugin sockets
	// KubeControllers runs the Kubernetes policy controller (one elected
	// instance per cluster) with this kubeconfig; empty disables it.
	KubeControllers string
	// KubeControllersLeakGracePeriod is how long a deleted pod's endpoints
	// and addresses, or a deleted node's Calico Node, stay before the
	// controller releases them; 0 disables that garbage collection.
	KubeControllersLeakGracePeriod time.Duration
	// K8sNodeRef is this node's name in Kubernetes (the DaemonSet passes
	// spec.nodeName); when set the Node is registered with a k8s orchRef,
	// which lets the controller remove it once the Kubernetes node is gone.
	K8sNodeRef string
	// ClusterType is CLUSTER_TYPE (e.g. "k8s,bgp"): on the Kubernetes
	// datastore, ClusterInformation's clusterType is made from it
	// (felix/node/kube.go KubeClusterType).
	ClusterType string
	// DefaultPools are created at start when their family has no pool
	// (CALICO_IPV4POOL_*, CALICO_IPV6POOL_*, NO_DEFAULT_POOLS: pools.go).
	// felix/node/pools.go creates them.
	DefaultPools []*api.IPPool
	// FelixEnv is the FELIX_* layer of the effective configuration
	// (settings.go), with --log-level as logSeverityScreen.
	FelixEnv spec
	// Logs are the installed logger's outputs, which logSeverityScreen,
	// logFilePath and logSeverityFile change live (log.go); nil
	// when Main did not install one.
	Logs *LogOutputs
}

// ParseFlags reads the agent's flags; every flag has an environment
// variable used when the flag is not given. FELIX_* settings are looked up
// by their upper-case names; Main passes the whole environment to Parse, so
// any case works there.
func ParseFlags(args []string, getenv func(string) string) (Config, error) {
	var environ []string
	for _, st := range settings {
		if v := getenv(st.env); v != "" {
			environ = append(environ, st.env+"="+v)
		}
	}
	return Parse(args, getenv, environ)
}

// Parse reads the agent's flags as ParseFlags does, with the FELIX_*
// settings taken from environ (KEY=value lines) in any case.
func Parse(args []string, getenv func(string) string, environ []string) (Config, error) {
	var c Config
	var etcd etcdFlags
	fs := pflag.NewFlagSet("calico-node", pflag.ContinueOnError)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	host, _ := os.Hostname()
	fs.StringVar(&c.NodeName, "nodename", env("NODENAME", host), "this node's name [NODENAME]")
	// The etcd flags default to nothing: apiconfig reads their variables
	// (and CALICO_-prefixed and FELIX_ETCD* ones), the flags override them.
	fs.StringVar(&etcd.endpoints, "etcd-endpoints", "", "comma-separated etcd endpoints; none set (nor ETCD_DISCOVERY_SRV) runs the embedded etcd off Kubernetes (docs/DATASTORE.md) [ETCD_ENDPOINTS]")
	fs.StringVar(&etcd.caFile, "etcd-ca-cert-file", "", "etcd CA certificate [ETCD_CA_CERT_FILE]")
	fs.StringVar(&etcd.certFile, "etcd-cert-file", "", "etcd client certificate [ETCD_CERT_FILE]")
	fs.StringVar(&etcd.keyFile, "etcd-key-file", "", "etcd client key [ETCD_KEY_FILE]")
	fs.StringVar(&c.EtcdDataDir, "etcd-data-dir", env("CALICO_ETCD_DATA_DIR", embedded.DefaultDataDir), "embedded etcd data directory [CALICO_ETCD_DATA_DIR]")
	fs.StringVar(&c.EtcdClientURL, "etcd-client-url", env("CALICO_ETCD_CLIENT_URL", embedded.DefaultClientURL), "embedded etcd client URL [CALICO_ETCD_CLIENT_URL]")
	fs.StringVar(&c.EtcdPeerURL, "etcd-peer-url", env("CALICO_ETCD_PEER_URL", embedded.DefaultPeerURL), "embedded etcd peer URL [CALICO_ETCD_PEER_URL]")
	fs.StringVar(&c.IP, "ip", env("IP", "autodetect"), "node IPv4 address/prefix, \"autodetect\" or \"none\" [IP]")
	fs.StringVar(&c.IP6, "ip6", env("IP6", "none"), "node IPv6 address/prefix, \"autodetect\" or \"none\" [IP6]")
	fs.StringVar(&c.IPAutodetectionMethod, "ip-autodetection-method", env("IP_AUTODETECTION_METHOD", "first-found"), "first-found, interface=REGEX, can-reach=ADDR or cidr=CIDR [IP_AUTODETECTION_METHOD]")
	fs.StringVar(&c.IP6AutodetectionMethod, "ip6-autodetection-method", env("IP6_AUTODETECTION_METHOD", "first-found"), "as --ip-autodetection-method, for IPv6 [IP6_AUTODETECTION_METHOD]")
	asn := fs.Uint32("as", uint32(envInt(getenv, "AS", 0)), "this node's AS number (default: the cluster's) [AS]")
	fs.IntVar(&c.MTU, "mtu", envInt(getenv, "FELIX_MTU", 0), "pod interface MTU written for the CNI plugin; 0 detects it from the host interfaces and pools (docs/BOOTSTRAP.md) [FELIX_MTU]")
	fs.StringVar(&c.LibDir, "lib-dir", env("CALICO_LIB_DIR", "/var/lib/calico"), "node state directory (nodename, mtu files) [CALICO_LIB_DIR]")
	fs.StringVar(&c.RunDir, "run-dir", env("CALICO_RUN_DIR", "/var/run/calico"), "runtime directory (status socket, locks) [CALICO_RUN_DIR]")
	fs.StringVar(&c.HealthAddr, "health-addr", env("FELIX_HEALTHADDR", ""), "health endpoint address; empty disables; when given, wins over healthEnabled/Host/Port (default localhost:9099) [FELIX_HEALTHADDR]")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", env("FELIX_METRICSADDR", ""), "Prometheus metrics address; empty disables; when given, wins over prometheusMetricsEnabled/Host/Port (default :9091) [FELIX_METRICSADDR]")
	fs.DurationVar(&c.ResyncInterval, "resync-interval", envDuration(getenv, "FELIX_RESYNC_INTERVAL", 0), "when set, every refresh interval the FELIX_*REFRESHINTERVAL variables leave unset (iptables, routes, ipsets, interfaces; they win over FelixConfiguration), and the CNI journal replay period (30s when unset) [FELIX_RESYNC_INTERVAL]")
	backend := env("CALICO_NETWORKING_BACKEND", "bird") // bird, vxlan (routes from the datastore only) or none
	fs.BoolVar(&c.BGP, "bgp", backend != "none" && backend != "vxlan", "run the embedded BGP speaker [CALICO_NETWORKING_BACKEND=none or vxlan disables]")
	fs.StringVar(&c.BGPSecretsDir, "bgp-secrets-dir", env("CALICO_BGP_SECRETS_DIR", "/etc/calico/bgp-secrets"), "BGP peer passwords, as <dir>/<secret>/<key> [CALICO_BGP_SECRETS_DIR]")
	fs.StringVar(&c.LogLevel, "log-level", "", "Trace, Debug, Info, Warning, Error or Fatal (any case); wins over FelixConfiguration logSeverityScreen [FELIX_LOGSEVERITYSCREEN]")
	fs.BoolVar(&c.Libnetwork, "libnetwork", strings.EqualFold(env("CALICO_LIBNETWORK_ENABLED", "false"), "true"), "serve Docker's network and IPAM driver (calico, calico-ipam) [CALICO_LIBNETWORK_ENABLED]")
	fs.StringVar(&c.LibnetworkSocketDir, "libnetwork-socket-dir", env("CALICO_LIBNETWORK_SOCKET_DIR", "/run/docker/plugins"), "Docker plugin socket directory [CALICO_LIBNETWORK_SOCKET_DIR]")
	fs.StringVar(&c.KubeControllers, "kube-controllers-kubeconfig", env("CALICO_KUBE_CONTROLLERS_KUBECONFIG", ""), "run the Kubernetes policy controller (leader-elected) with this kubeconfig [CALICO_KUBE_CONTROLLERS_KUBECONFIG]")
	fs.DurationVar(&c.KubeControllersLeakGracePeriod, "kube-controllers-leak-grace-period", envDuration(getenv, "CALICO_KUBE_CONTROLLERS_LEAK_GRACE_PERIOD", controller.DefaultLeakGracePeriod), "how long a deleted pod's addresses and endpoints, or a deleted node, stay before the controller releases them; 0 disables [CALICO_KUBE_CONTROLLERS_LEAK_GRACE_PERIOD]")
	fs.StringVar(&c.K8sNodeRef, "k8s-node-ref", env("CALICO_K8S_NODE_REF", ""), "this node's Kubernetes node name, registered as the Node's k8s orchRef [CALICO_K8S_NODE_REF]")
	c.ClusterType = getenv("CLUSTER_TYPE")
	fs.IntVar(&c.BGPPort, "bgp-port", envInt(getenv, "BGP_PORT", 179), "BGP listen port [BGP_PORT]")
	fs.StringVar(&c.BGPRouterID, "router-id", env("CALICO_ROUTER_ID", ""), "BGP router ID: an IPv4 address, or \"hash\" to derive it from the node name; default the node's IPv4 address [CALICO_ROUTER_ID]")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	c.ASNumber = *asn
	if _, err := peering.RouterID(c.BGPRouterID, "", netip.IPv4Unspecified()); err != nil {
		return c, err
	}
	c.HealthAddrSet = fs.Changed("health-addr") || getenv("FELIX_HEALTHADDR") != ""
	c.MetricsAddrSet = fs.Changed("metrics-addr") || getenv("FELIX_METRICSADDR") != ""
	var err error
	if c.DefaultPools, err = ParseDefaultPools(getenv); err != nil {
		return c, err
	}
	if err := checkMTU(c.MTU); err != nil {
		return c, err
	}
	if c.FelixEnv, err = ParseFelixEnv(environ); err != nil {
		return c, err
	}
	if c.ResyncInterval > 0 {
		d := &api.Duration{Duration: c.ResyncInterval}
		for _, p := range []**api.Duration{&c.FelixEnv.IptablesRefreshInterval, &c.FelixEnv.RouteRefreshInterval, &c.FelixEnv.IpsetsRefreshInterval, &c.FelixEnv.InterfaceRefreshInterval} {
			if *p == nil {
				*p = d
			}
		}
	}
	if c.LogLevel != "" {
		lvl, err := OneOf(LogLevelNames...)(logLevelAlias(c.LogLevel))
		if err != nil {
			return c, fmt.Errorf("--log-level=%q: %w", c.LogLevel, err)
		}
		c.FelixEnv.LogSeverityScreen = lvl
	}
	if c.NodeName == "" {
		return c, fmt.Errorf("--nodename: no node name given and the hostname is empty")
	}
	if c.Datastore, err = chooseDatastore(getenv, etcd); err != nil {
		return c, err
	}
	return c, c.checkEtcdOnly()
}

func envInt(getenv func(string) string, name string, def int) int {
	if v, err := strconv.Atoi(getenv(name)); err == nil {
		return v
	}
	return def
}

func envDuration(getenv func(string) string, name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(getenv(name)); err == nil {
		return v
	}
	return def
}

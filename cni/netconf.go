// Package cni holds the CNI plugin ("calico") and the CNI IPAM plugin
// ("calico-ipam"): netconf parsing, pod wiring, endpoints and allocation.
package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
)

// Default state paths; the netconf may move them (several test "nodes" share
// one filesystem).
const (
	DefaultLibDir = "/var/lib/calico"
	DefaultRunDir = "/var/run/calico"
)

// flexBool accepts true/false as JSON booleans or strings, as Calico's
// assign_ipv4/assign_ipv6 do.
type flexBool struct {
	set bool
	val bool
}

func (b *flexBool) UnmarshalJSON(data []byte) error {
	s := strings.Trim(string(data), `"`)
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("%s is not true or false", data)
	}
	b.set, b.val = true, v
	return nil
}

func (b flexBool) or(def bool) bool {
	if b.set {
		return b.val
	}
	return def
}

// IPAMConf is the netconf's "ipam" section.
type IPAMConf struct {
	Type       string   `json:"type"`
	AssignIPv4 flexBool `json:"assign_ipv4"`
	AssignIPv6 flexBool `json:"assign_ipv6"`
	IPv4Pools  []string `json:"ipv4_pools"`
	IPv6Pools  []string `json:"ipv6_pools"`
	Subnet     string   `json:"subnet"`
	// Routes are the pod's routes instead of the default ones; as in
	// Calico, read only with host-local IPAM (netconf_keys.go).
	Routes []IPAMRoute `json:"routes"`
}

// IPAMRoute is one ipam.routes entry; the gateway is always the host end.
type IPAMRoute struct {
	Dst string `json:"dst"`
}

// NetConf is Calico's CNI network configuration.
type NetConf struct {
	CNIVersion   string `json:"cniVersion"`
	Name         string `json:"name"`
	Type         string `json:"type"`
	MTU          int    `json:"mtu"`
	Nodename     string `json:"nodename"`
	NodenameFile string `json:"nodename_file"`

	// The datastore (datastore.go: store/apiconfig resolves it with the
	// environment and the Kubernetes keys below).
	DatastoreType    string `json:"datastore_type"`
	EtcdEndpoints    string `json:"etcd_endpoints"`
	EtcdDiscoverySrv string `json:"etcd_discovery_srv"`
	EtcdKeyFile      string `json:"etcd_key_file"`
	EtcdCertFile     string `json:"etcd_cert_file"`
	EtcdCACertFile   string `json:"etcd_ca_cert_file"`
	LogLevel         string `json:"log_level"`

	IPAM   IPAMConf `json:"ipam"`
	Policy struct {
		Type string `json:"type"`
		// The Kubernetes API's access, as older netconfs give it.
		K8sAPIRoot              string `json:"k8s_api_root"`
		K8sAuthToken            string `json:"k8s_auth_token"`
		K8sClientCertificate    string `json:"k8s_client_certificate"`
		K8sClientKey            string `json:"k8s_client_key"`
		K8sCertificateAuthority string `json:"k8s_certificate_authority"`
	} `json:"policy"`
	Kubernetes struct {
		Kubeconfig string `json:"kubeconfig"`
		NodeName   string `json:"node_name"`
		K8sAPIRoot string `json:"k8s_api_root"`
	} `json:"kubernetes"`
	FeatureControl struct {
		IPAddrsNoIpam bool `json:"ip_addrs_no_ipam"`
		FloatingIPs   bool `json:"floating_ips"`
	} `json:"feature_control"`
	ContainerSettings struct {
		AllowIPForwarding bool `json:"allow_ip_forwarding"`
	} `json:"container_settings"`
	IncludeDefaultRoutes bool `json:"include_default_routes"`

	// The rest of Calico 3.32's netconf (netconf_keys.go).
	PolicySetupTimeoutSeconds int      `json:"policy_setup_timeout_seconds"`
	EndpointStatusDir         string   `json:"endpoint_status_dir"`
	ReadinessGates            []string `json:"readiness_gates"`
	RequireMTUFile            bool     `json:"require_mtu_file"`
	NumQueues                 int      `json:"num_queues"`
	IPAMLockFile              string   `json:"ipam_lock_file"`
	NodenameFileOptional      *bool    `json:"nodename_file_optional"`
	LogFilePath               string   `json:"log_file_path"`
	LogFileMaxSize            int      `json:"log_file_max_size"`
	LogFileMaxAge             int      `json:"log_file_max_age"`
	LogFileMaxCount           int      `json:"log_file_max_count"`

	// Our own extensions: where node-local state lives.
	LibDir string `json:"calico_lib_dir"`
	RunDir string `json:"calico_run_dir"`

	// GC: the attachments still in use.
	ValidAttachments []types.GCAttachment `json:"cni.dev/valid-attachments"`
	Attachments      []types.GCAttachment `json:"cni.dev/attachments"`

	RawPrevResult map[string]any `json:"prevResult"`
}

// ConfigError is CNI error 7 (invalid network config) naming the field.
func ConfigError(field, format string, a ...any) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("invalid network config: %s: %s", field, fmt.Sprintf(format, a...)), "")
}

// LoadNetConf parses and checks a netconf. Unknown fields are ignored;
// wrong types and impossible values are CNI error 7 naming the field.
func LoadNetConf(data []byte) (*NetConf, error) {
	c := &NetConf{}
	if err := json.Unmarshal(data, c); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, ConfigError(te.Field, "cannot use a JSON %s here (want %s)", te.Value, te.Type)
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, ConfigError("(document)", "invalid JSON at byte %d: %v", se.Offset, err)
		}
		// Field-level errors from our own decoders (assign_ipv4 and friends).
		return nil, ConfigError("ipam", "%v", err)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *NetConf) validate() error {
	switch {
	case c.Name == "":
		return ConfigError("name", "the network needs a name")
	case c.MTU < 0 || c.MTU > 65535 || (c.MTU > 0 && c.MTU < 68):
		return ConfigError("mtu", "%d is not a usable MTU (68-65535, or 0 for the default)", c.MTU)
	case c.IPAM.Type == "":
		return ConfigError("ipam.type", "no IPAM plugin named")
	case c.IPAM.Type == "calico-ipam" && !c.IPAM.AssignIPv4.or(true) && !c.IPAM.AssignIPv6.or(false):
		return ConfigError("ipam.assign_ipv4", "both assign_ipv4 and assign_ipv6 are false: nothing to assign")
	case c.DatastoreType != "" && c.DatastoreType != "etcdv3" && c.DatastoreType != "kubernetes":
		return ConfigError("datastore_type", "%q: must be etcdv3 or kubernetes", c.DatastoreType)
	}
	for _, e := range c.endpoints() {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return ConfigError("etcd_endpoints", "%q is not an http(s) URL", e)
		}
	}
	switch strings.ToLower(c.LogLevel) {
	case "", "debug", "info", "warning", "warn", "error", "fatal", "panic":
	default:
		return ConfigError("log_level", "%q is not a log level (debug, info, warning, error)", c.LogLevel)
	}
	for _, p := range append(append([]string{}, c.IPAM.IPv4Pools...), c.IPAM.IPv6Pools...) {
		if strings.TrimSpace(p) == "" {
			return ConfigError("ipam.ipv4_pools", "empty pool name")
		}
	}
	return c.validateKeys()
}

func (c *NetConf) endpoints() []string {
	var out []string
	for _, e := range strings.Split(c.EtcdEndpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func (c *NetConf) libDir() string {
	if c.LibDir != "" {
		return c.LibDir
	}
	return DefaultLibDir
}

func (c *NetConf) runDir() string {
	if c.RunDir != "" {
		return c.RunDir
	}
	return DefaultRunDir
}

// NodeName resolves this node's name: nodename, kubernetes.node_name, the
// nodename file written by calico-node, then the hostname.
func (c *NetConf) NodeName() (string, error) {
	if c.Nodename != "" {
		return c.Nodename, nil
	}
	if c.Kubernetes.NodeName != "" {
		return c.Kubernetes.NodeName, nil
	}
	file := c.NodenameFile
	if file == "" {
		file = filepath.Join(c.libDir(), "nodename")
	}
	if b, err := os.ReadFile(file); err == nil {
		if n := strings.TrimSpace(string(b)); n != "" {
			return n, nil
		}
	} else if c.NodenameFile != "" {
		return "", ConfigError("nodename_file", "cannot read %s: %v", file, err)
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "", ConfigError("nodename", "no node name configured and the hostname is unknown")
	}
	return h, nil
}

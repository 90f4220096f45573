// Package apiconfig decides which datastore a process uses and how it
// reaches it, as Calico's components decide: calico-node from its
// environment (FromEnv), calicoctl from its CalicoAPIConfig file or else its
// environment (FromCalicoctl), the CNI plugins from their netconf over their
// environment (FromNetConf). It is pure: the environment, files and the
// service account directory come in through a Host.
//
// Each front end turns its inputs into layers of settings keyed by the
// config file's names (spec.datastoreType, spec.etcdEndpoints, ...), each
// setting remembering where it came from; resolve then checks them, picks
// the datastore type and fills a Config. Every setting Calico knows is
// either honoured or refused with an error naming where it was set.
package apiconfig

import (
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/kdd"
)

// Type is a datastore type, as DATASTORE_TYPE names it.
type Type string

// The two datastores.
const (
	EtcdV3     Type = "etcdv3"
	Kubernetes Type = "kubernetes"
)

// Key names a setting by its CalicoAPIConfig spec key.
type Key string

// The settings Calico's CalicoAPIConfig spec knows.
const (
	KeyDatastoreType      Key = "datastoreType"
	KeyEtcdEndpoints      Key = "etcdEndpoints"
	KeyEtcdDiscoverySrv   Key = "etcdDiscoverySrv"
	KeyEtcdUsername       Key = "etcdUsername"
	KeyEtcdPassword       Key = "etcdPassword"
	KeyEtcdKeyFile        Key = "etcdKeyFile"
	KeyEtcdCertFile       Key = "etcdCertFile"
	KeyEtcdCACertFile     Key = "etcdCACertFile"
	KeyEtcdKey            Key = "etcdKey"
	KeyEtcdCert           Key = "etcdCert"
	KeyEtcdCACert         Key = "etcdCACert"
	KeyKubeconfig         Key = "kubeconfig"
	KeyKubeconfigInline   Key = "kubeconfigInline"
	KeyK8sAPIEndpoint     Key = "k8sAPIEndpoint"
	KeyK8sKeyFile         Key = "k8sKeyFile"
	KeyK8sCertFile        Key = "k8sCertFile"
	KeyK8sCAFile          Key = "k8sCAFile"
	KeyK8sAPIToken        Key = "k8sAPIToken"
	KeyK8sInsecure        Key = "k8sInsecureSkipTLSVerify"
	KeyK8sDisableNodePoll Key = "k8sDisableNodePoll"
	KeyUsePodCIDR         Key = "usePodCIDR"
	KeyK8sClientQPS       Key = "k8sClientQPS"
	KeyK8sCurrentContext  Key = "k8sCurrentContext"
	KeyCalicoAPIGroup     Key = "calicoAPIGroup"
)

// Source says where a setting's value came from, in the words a user would
// look for: "DATASTORE_TYPE", "netconf datastore_type",
// "/etc/calico/calicoctl.cfg spec.etcdEndpoints", "--etcd-endpoints",
// or one of the defaults below.
type Source string

// Sources of values nobody set.
const (
	SourceDefault         Source = "default"
	SourceDefaultInPod    Source = "default (in a Kubernetes pod, no etcd configured)"
	SourceDefaultNotInPod Source = "default (not in a Kubernetes pod)"
	SourceDefaultEtcdSet  Source = "default (etcd endpoints configured)"
	SourceHomeKubeconfig  Source = "default ($HOME/.kube/config)"
)

// Config is the resolved datastore: its type, how to reach etcd, how to
// reach Kubernetes (both are filled whatever the type: the CNI plugin reads
// pods through the Kubernetes settings in etcd mode too) and where each
// value came from.
type Config struct {
	Type Type
	// Etcd's Endpoints are those listed, or found by DNS SRV records
	// (Source(KeyEtcdDiscoverySrv) then says where the domain came from),
	// or store.DefaultEndpoint (the embedded etcd) when neither was set:
	// Source(KeyEtcdEndpoints) and Source(KeyEtcdDiscoverySrv) are then
	// both SourceDefault.
	Etcd store.Config
	Kube Kube
	// APIGroup is the group of Calico's resource CRDs CALICO_API_GROUP
	// (or calicoAPIGroup) names; empty when unset: the Kubernetes backend
	// then discovers it with Calico's rule (store/kube ChooseAPIGroup).
	APIGroup kdd.APIGroup
	// InPod: the process runs in a Kubernetes pod (KUBERNETES_SERVICE_HOST
	// or a mounted service account token).
	InPod bool
	// Sources holds where each set value came from; Source reads it.
	Sources map[Key]Source
	// Warnings name settings that are valid but unused by the chosen
	// datastore (etcd settings in Kubernetes mode, as Calico ignores them);
	// the caller logs them once.
	Warnings []string
}

// Source is where setting k came from (SourceDefault when nobody set it).
func (c *Config) Source(k Key) Source {
	if s, ok := c.Sources[k]; ok {
		return s
	}
	return SourceDefault
}

// Kube is how to reach the Kubernetes API. RESTConfig turns it into a
// client-go config: a kubeconfig, then an explicit endpoint, then the pod's
// in-cluster service account; the explicit fields override what the
// kubeconfig or the service account gives.
type Kube struct {
	// Kubeconfig is a path, or several joined by ':' as in KUBECONFIG
	// (the first file to set a value wins).
	Kubeconfig string
	// KubeconfigInline is a kubeconfig's content (calicoctl.cfg only); it
	// replaces Kubeconfig.
	KubeconfigInline      string
	APIEndpoint           string
	Token                 string
	CertFile              string
	KeyFile               string
	CAFile                string
	InsecureSkipTLSVerify bool
	CurrentContext        string
	QPS                   float32
}

// set says whether anything names a way to the API other than the pod's
// own service account.
func (k Kube) set() bool {
	return k.Kubeconfig != "" || k.KubeconfigInline != "" || k.APIEndpoint != ""
}

// DefaultServiceAccountDir is where Kubernetes mounts a pod's service
// account token and CA.
const DefaultServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Host is what resolution reads from its surroundings; tests fake it.
type Host struct {
	Getenv   func(string) string
	ReadFile func(string) ([]byte, error)
	// ServiceAccountDir holds "token" and "ca.crt" in a pod.
	ServiceAccountDir string
	// LookupSRV finds etcd by DNS when ETCD_DISCOVERY_SRV is set.
	LookupSRV LookupSRV
}

// OSHost is the process's own environment and filesystem.
func OSHost() Host {
	return Host{Getenv: os.Getenv, ReadFile: os.ReadFile, ServiceAccountDir: DefaultServiceAccountDir, LookupSRV: net.LookupSRV}
}

func (h Host) tokenPath() string { return filepath.Join(h.ServiceAccountDir, "token") }
func (h Host) caPath() string    { return filepath.Join(h.ServiceAccountDir, "ca.crt") }

// inPod says whether the process runs in a Kubernetes pod: the API
// server's service variable is set or a service account token is mounted.
func (h Host) inPod() bool {
	if h.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		return true
	}
	_, err := h.ReadFile(h.tokenPath())
	return err == nil
}

// exists says whether a file can be read.
func (h Host) exists(path string) bool {
	_, err := h.ReadFile(path)
	return err == nil
}

// LogAttrs are slog key/value pairs saying which datastore was chosen and
// how it is reached, with where each came from; never a token.
func (c *Config) LogAttrs() []any {
	attrs := []any{"datastore", string(c.Type), "datastoreFrom", string(c.Source(KeyDatastoreType))}
	if c.Type == EtcdV3 {
		return append(attrs, "etcdEndpoints", strings.Join(c.Etcd.Endpoints, ","), "etcdEndpointsFrom", string(c.etcdSource()))
	}
	switch {
	case c.Kube.KubeconfigInline != "":
		attrs = append(attrs, "kubeconfig", "(inline)", "kubeconfigFrom", string(c.Source(KeyKubeconfigInline)))
	case c.Kube.Kubeconfig != "":
		attrs = append(attrs, "kubeconfig", c.Kube.Kubeconfig, "kubeconfigFrom", string(c.Source(KeyKubeconfig)))
	case c.Kube.APIEndpoint != "":
		attrs = append(attrs, "k8sAPIEndpoint", c.Kube.APIEndpoint, "k8sAPIEndpointFrom", string(c.Source(KeyK8sAPIEndpoint)))
	default:
		attrs = append(attrs, "kubeconfig", "(in-cluster service account)")
	}
	return attrs
}

// etcdSource is where the etcd endpoints came from: listed, discovered, or
// the default.
func (c *Config) etcdSource() Source {
	if s, ok := c.Sources[KeyEtcdDiscoverySrv]; ok {
		return s
	}
	return c.Source(KeyEtcdEndpoints)
}

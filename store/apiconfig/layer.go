package apiconfig

import "strings"

// value is one setting's text and where it came from.
type value struct {
	text string
	src  Source
}

// layer is one source's settings: the environment, a config file, a
// netconf, the command line. Only settings given a non-empty value are in it.
type layer map[Key]value

// set records a non-empty value.
func (l layer) set(k Key, text string, src Source) {
	if text != "" {
		l[k] = value{text: text, src: src}
	}
}

// over returns l with every setting of top replacing l's.
func (l layer) over(top layer) layer {
	out := layer{}
	for k, v := range l {
		out[k] = v
	}
	for k, v := range top {
		out[k] = v
	}
	return out
}

// envVar is the environment variable of a setting: Calico's components read
// CALICO_<name> first, then <name>.
type envVar struct {
	key  Key
	name string
	// prefixedOnly: Calico reads only CALICO_<name> (a setting without a
	// variable of its own, named after its field).
	prefixedOnly bool
}

// envVars are the variables Calico's components read their datastore from.
// The inline certificates and kubeconfig (etcdKey, etcdCert, etcdCACert,
// kubeconfigInline) have none, so they cannot leak through the environment.
var envVars = []envVar{
	{key: KeyDatastoreType, name: "DATASTORE_TYPE"},
	{key: KeyEtcdEndpoints, name: "ETCD_ENDPOINTS"},
	{key: KeyEtcdDiscoverySrv, name: "ETCD_DISCOVERY_SRV"},
	{key: KeyEtcdUsername, name: "ETCD_USERNAME"},
	{key: KeyEtcdPassword, name: "ETCD_PASSWORD"},
	{key: KeyEtcdKeyFile, name: "ETCD_KEY_FILE"},
	{key: KeyEtcdCertFile, name: "ETCD_CERT_FILE"},
	{key: KeyEtcdCACertFile, name: "ETCD_CA_CERT_FILE"},
	{key: KeyKubeconfig, name: "KUBECONFIG"},
	{key: KeyK8sAPIEndpoint, name: "K8S_API_ENDPOINT"},
	{key: KeyK8sKeyFile, name: "K8S_KEY_FILE"},
	{key: KeyK8sCertFile, name: "K8S_CERT_FILE"},
	{key: KeyK8sCAFile, name: "K8S_CA_FILE"},
	{key: KeyK8sInsecure, name: "K8S_INSECURE_SKIP_TLS_VERIFY"},
	{key: KeyK8sDisableNodePoll, name: "K8S_DISABLE_NODE_POLL"},
	{key: KeyUsePodCIDR, name: "USE_POD_CIDR"},
	{key: KeyK8sCurrentContext, name: "K8S_CURRENT_CONTEXT"},
	{key: KeyCalicoAPIGroup, name: "CALICO_API_GROUP"},
	{key: KeyK8sAPIToken, name: "K8SAPITOKEN", prefixedOnly: true},
	{key: KeyK8sClientQPS, name: "K8SCLIENTQPS", prefixedOnly: true},
}

// envLayer reads the environment's settings.
func envLayer(getenv func(string) string) layer {
	l := layer{}
	for _, e := range envVars {
		prefixed := "CALICO_" + e.name
		switch {
		case getenv(prefixed) != "":
			l.set(e.key, getenv(prefixed), Source(prefixed))
		case !e.prefixedOnly:
			l.set(e.key, getenv(e.name), Source(e.name))
		}
	}
	return l
}

// EtcdFlags are command-line flags that override the etcd settings
// (calicoctl's and calico-node's --etcd-endpoints and friends); empty
// fields override nothing.
type EtcdFlags struct {
	Endpoints, CAFile, CertFile, KeyFile string
}

func (f EtcdFlags) layer() layer {
	l := layer{}
	l.set(KeyEtcdEndpoints, f.Endpoints, "--etcd-endpoints")
	l.set(KeyEtcdCACertFile, f.CAFile, "--etcd-ca-cert-file")
	l.set(KeyEtcdCertFile, f.CertFile, "--etcd-cert-file")
	l.set(KeyEtcdKeyFile, f.KeyFile, "--etcd-key-file")
	return l
}

// FromEnv resolves calico-node's datastore: Calico's variables, Felix's
// own over them (felixLayer), then the flags.
func FromEnv(h Host, flags EtcdFlags) (*Config, error) {
	var warn []string
	felix, err := felixLayer(h.Getenv, &warn)
	if err != nil {
		return nil, err
	}
	env := envLayer(h.Getenv)
	if eps, ok := felix[KeyEtcdEndpoints]; ok {
		if err := felixEtcdVsKube(eps, env); err != nil {
			return nil, err
		}
	}
	c, err := resolve(env.over(felix).over(flags.layer()), h, "KUBECONFIG or K8S_API_ENDPOINT")
	if err != nil {
		return nil, err
	}
	c.Warnings = append(warn, c.Warnings...)
	return c, nil
}

// NetConf is the datastore part of a CNI netconf, as the CNI package has
// already parsed it.
type NetConf struct {
	DatastoreType    string // datastore_type
	EtcdEndpoints    string // etcd_endpoints
	EtcdDiscoverySrv string // etcd_discovery_srv
	EtcdKeyFile      string // etcd_key_file
	EtcdCertFile     string // etcd_cert_file
	EtcdCACertFile   string // etcd_ca_cert_file
	Kubeconfig       string // kubernetes.kubeconfig
	K8sAPIRoot       string // kubernetes.k8s_api_root
	// The policy section's Kubernetes access (Calico's plugin builds its
	// Kubernetes client from these; here they reach the one client).
	PolicyK8sAPIRoot              string // policy.k8s_api_root
	PolicyK8sAuthToken            string // policy.k8s_auth_token
	PolicyK8sClientCertificate    string // policy.k8s_client_certificate
	PolicyK8sClientKey            string // policy.k8s_client_key
	PolicyK8sCertificateAuthority string // policy.k8s_certificate_authority
}

func (n NetConf) layer() layer {
	l := layer{}
	l.set(KeyDatastoreType, n.DatastoreType, "netconf datastore_type")
	l.set(KeyEtcdEndpoints, n.EtcdEndpoints, "netconf etcd_endpoints")
	l.set(KeyEtcdDiscoverySrv, n.EtcdDiscoverySrv, "netconf etcd_discovery_srv")
	l.set(KeyEtcdKeyFile, n.EtcdKeyFile, "netconf etcd_key_file")
	l.set(KeyEtcdCertFile, n.EtcdCertFile, "netconf etcd_cert_file")
	l.set(KeyEtcdCACertFile, n.EtcdCACertFile, "netconf etcd_ca_cert_file")
	l.set(KeyKubeconfig, n.Kubeconfig, "netconf kubernetes.kubeconfig")
	// Older netconfs give the API root with its /api/v1 path, as Calico
	// still accepts.
	l.set(KeyK8sAPIEndpoint, strings.Split(n.PolicyK8sAPIRoot, "/api/")[0], "netconf policy.k8s_api_root")
	l.set(KeyK8sAPIEndpoint, n.K8sAPIRoot, "netconf kubernetes.k8s_api_root")
	l.set(KeyK8sAPIToken, n.PolicyK8sAuthToken, "netconf policy.k8s_auth_token")
	l.set(KeyK8sCertFile, n.PolicyK8sClientCertificate, "netconf policy.k8s_client_certificate")
	l.set(KeyK8sKeyFile, n.PolicyK8sClientKey, "netconf policy.k8s_client_key")
	l.set(KeyK8sCAFile, n.PolicyK8sCertificateAuthority, "netconf policy.k8s_certificate_authority")
	return l
}

// FromNetConf resolves a CNI plugin's datastore: the netconf's keys over
// the environment, as Calico's plugin reads them.
func FromNetConf(h Host, n NetConf) (*Config, error) {
	return resolve(envLayer(h.Getenv).over(n.layer()), h,
		"kubernetes.kubeconfig or kubernetes.k8s_api_root in the netconf, or KUBECONFIG or K8S_API_ENDPOINT")
}

package apiconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"sigs.k8s.io/yaml"
)

// DefaultConfigPath is where calicoctl looks for its CalicoAPIConfig.
const DefaultConfigPath = "/etc/calico/calicoctl.cfg"

// apiConfigFile is calicoctl's config file: YAML or JSON, every key known
// (an unknown key is a syntax error, as in Calico).
type apiConfigFile struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata,omitempty"`
	Spec       struct {
		DatastoreType            string  `json:"datastoreType"`
		EtcdEndpoints            string  `json:"etcdEndpoints"`
		EtcdDiscoverySrv         string  `json:"etcdDiscoverySrv"`
		EtcdUsername             string  `json:"etcdUsername"`
		EtcdPassword             string  `json:"etcdPassword"`
		EtcdKeyFile              string  `json:"etcdKeyFile"`
		EtcdCertFile             string  `json:"etcdCertFile"`
		EtcdCACertFile           string  `json:"etcdCACertFile"`
		EtcdKey                  string  `json:"etcdKey"`
		EtcdCert                 string  `json:"etcdCert"`
		EtcdCACert               string  `json:"etcdCACert"`
		Kubeconfig               string  `json:"kubeconfig"`
		KubeconfigInline         string  `json:"kubeconfigInline"`
		K8sAPIEndpoint           string  `json:"k8sAPIEndpoint"`
		K8sKeyFile               string  `json:"k8sKeyFile"`
		K8sCertFile              string  `json:"k8sCertFile"`
		K8sCAFile                string  `json:"k8sCAFile"`
		K8sAPIToken              string  `json:"k8sAPIToken"`
		K8sInsecureSkipTLSVerify bool    `json:"k8sInsecureSkipTLSVerify"`
		K8sDisableNodePoll       bool    `json:"k8sDisableNodePoll"`
		UsePodCIDR               bool    `json:"usePodCIDR"`
		K8sClientQPS             float32 `json:"k8sClientQPS"`
		K8sCurrentContext        string  `json:"k8sCurrentContext"`
		CalicoAPIGroup           string  `json:"calicoAPIGroup"`
	} `json:"spec"`
}

// parseConfigFile reads a CalicoAPIConfig; errors read as Calico's.
func parseConfigFile(path string, data []byte) (layer, error) {
	var f apiConfigFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("syntax error in %s: failed to parse config as YAML/JSON: %w", path, err)
	}
	if f.APIVersion != "projectcalico.org/v3" {
		return nil, fmt.Errorf("syntax error in %s: invalid config file: unknown APIVersion '%s'", path, f.APIVersion)
	}
	if f.Kind != "CalicoAPIConfig" {
		return nil, fmt.Errorf("syntax error in %s: invalid config file: expected kind 'CalicoAPIConfig', got '%s'", path, f.Kind)
	}
	s := f.Spec
	l := layer{}
	for _, e := range []struct {
		k    Key
		text string
	}{
		{KeyDatastoreType, s.DatastoreType}, {KeyEtcdEndpoints, s.EtcdEndpoints},
		{KeyEtcdDiscoverySrv, s.EtcdDiscoverySrv}, {KeyEtcdUsername, s.EtcdUsername},
		{KeyEtcdPassword, s.EtcdPassword}, {KeyEtcdKeyFile, s.EtcdKeyFile},
		{KeyEtcdCertFile, s.EtcdCertFile}, {KeyEtcdCACertFile, s.EtcdCACertFile},
		{KeyEtcdKey, s.EtcdKey}, {KeyEtcdCert, s.EtcdCert}, {KeyEtcdCACert, s.EtcdCACert},
		{KeyKubeconfig, s.Kubeconfig}, {KeyKubeconfigInline, s.KubeconfigInline},
		{KeyK8sAPIEndpoint, s.K8sAPIEndpoint}, {KeyK8sKeyFile, s.K8sKeyFile},
		{KeyK8sCertFile, s.K8sCertFile}, {KeyK8sCAFile, s.K8sCAFile},
		{KeyK8sAPIToken, s.K8sAPIToken}, {KeyK8sCurrentContext, s.K8sCurrentContext},
		{KeyCalicoAPIGroup, s.CalicoAPIGroup},
		{KeyK8sInsecure, boolText(s.K8sInsecureSkipTLSVerify)},
		{KeyK8sDisableNodePoll, boolText(s.K8sDisableNodePoll)},
		{KeyUsePodCIDR, boolText(s.UsePodCIDR)},
		{KeyK8sClientQPS, qpsText(s.K8sClientQPS)},
	} {
		l.set(e.k, e.text, Source(path+" spec."+string(e.k)))
	}
	return l, nil
}

// boolText is a true file boolean as text; false is the same as unset.
func boolText(b bool) string {
	if b {
		return "true"
	}
	return ""
}

func qpsText(q float32) string {
	if q == 0 {
		return ""
	}
	return strconv.FormatFloat(float64(q), 'g', -1, 32)
}

// FromCalicoctl resolves calicoctl's datastore as Calico's calicoctl does:
// the config file at path when it exists, and then only the file (the
// environment is not read); with no file at the default path, the
// environment. A path other than the default that cannot be read is an
// error. The flags override either.
func FromCalicoctl(h Host, path string, flags EtcdFlags) (*Config, error) {
	if path == "" {
		path = DefaultConfigPath
	}
	data, err := h.ReadFile(path)
	switch {
	case err == nil:
		l, err := parseConfigFile(path, data)
		if err != nil {
			return nil, err
		}
		return resolve(l.over(flags.layer()), h, "spec.kubeconfig or spec.k8sAPIEndpoint in "+path)
	case errors.Is(err, fs.ErrNotExist) && path == DefaultConfigPath:
		return resolve(envLayer(h.Getenv).over(flags.layer()), h,
			"KUBECONFIG or K8S_API_ENDPOINT, or spec.kubeconfig in "+DefaultConfigPath)
	}
	return nil, fmt.Errorf("Error reading config file: %s: %w", path, err)
}

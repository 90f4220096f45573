package apiconfig

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ErrNoKubernetesAPI: neither a kubeconfig, nor an endpoint, nor a pod's
// service account says where the Kubernetes API is.
var ErrNoKubernetesAPI = errors.New("no Kubernetes API configured")

// RESTConfig builds the client-go config of the Kubernetes settings, the
// way Calico's Kubernetes datastore does: a kubeconfig (inline, or the
// files), else the explicit endpoint, else the pod's service account
// (KUBERNETES_SERVICE_HOST/PORT, token and ca.crt in h.ServiceAccountDir);
// the explicit endpoint, token, client certificate, CA and insecure flag
// override what the kubeconfig or the service account gives. It reads
// files but contacts nothing.
func (k Kube) RESTConfig(h Host) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	switch {
	case k.KubeconfigInline != "":
		cfg, err = k.fromInline()
	case k.Kubeconfig != "":
		cfg, err = k.fromFiles()
	case k.APIEndpoint != "":
		cfg, err = clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(), k.overrides()).ClientConfig()
		if err != nil {
			err = fmt.Errorf("Kubernetes API %s: %w", k.APIEndpoint, err)
		}
	default:
		cfg, err = k.inCluster(h)
	}
	if err != nil {
		return nil, err
	}
	if k.QPS > 0 {
		cfg.QPS = k.QPS
	}
	return cfg, nil
}

// overrides are the explicit settings, as kubeconfig overrides.
func (k Kube) overrides() *clientcmd.ConfigOverrides {
	o := &clientcmd.ConfigOverrides{CurrentContext: k.CurrentContext}
	o.ClusterInfo.Server = k.APIEndpoint
	o.ClusterInfo.CertificateAuthority = k.CAFile
	o.ClusterInfo.InsecureSkipTLSVerify = k.InsecureSkipTLSVerify
	o.AuthInfo.ClientCertificate = k.CertFile
	o.AuthInfo.ClientKey = k.KeyFile
	o.AuthInfo.Token = k.Token
	return o
}

func (k Kube) fromInline() (*rest.Config, error) {
	raw, err := clientcmd.Load([]byte(k.KubeconfigInline))
	if err != nil {
		return nil, fmt.Errorf("inline kubeconfig: %w", err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, k.overrides()).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("inline kubeconfig: %w", err)
	}
	return cfg, nil
}

// fromFiles loads the kubeconfig files; a ':'-separated list is merged as
// kubectl merges KUBECONFIG.
func (k Kube) fromFiles() (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{}
	if paths := filepath.SplitList(k.Kubeconfig); len(paths) > 1 {
		rules.Precedence = paths
	} else {
		rules.ExplicitPath = k.Kubeconfig
	}
	raw, err := rules.Load()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", k.Kubeconfig, err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, k.overrides()).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", k.Kubeconfig, err)
	}
	return cfg, nil
}

// inCluster is the pod's service account config, with the explicit
// settings over it.
func (k Kube) inCluster(h Host) (*rest.Config, error) {
	host, port := h.Getenv("KUBERNETES_SERVICE_HOST"), h.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, fmt.Errorf("%w: no kubeconfig, no API endpoint, and not in a Kubernetes pod "+
			"(KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT unset)", ErrNoKubernetesAPI)
	}
	if k.CurrentContext != "" {
		return nil, fmt.Errorf("a kubeconfig context (%q) is set but there is no kubeconfig", k.CurrentContext)
	}
	cfg := &rest.Config{Host: "https://" + net.JoinHostPort(host, port)}
	cfg.TLSClientConfig.CAFile = h.caPath()
	if k.Token != "" {
		cfg.BearerToken = k.Token
	} else {
		token, err := h.ReadFile(h.tokenPath())
		if err != nil {
			return nil, fmt.Errorf("in-cluster Kubernetes config: service account token: %w", err)
		}
		// The file is read again as the kubelet rotates it.
		cfg.BearerToken, cfg.BearerTokenFile = strings.TrimSpace(string(token)), h.tokenPath()
	}
	if k.CAFile != "" {
		cfg.TLSClientConfig.CAFile = k.CAFile
	}
	if k.InsecureSkipTLSVerify {
		// client-go refuses a CA with the insecure flag.
		cfg.TLSClientConfig.Insecure, cfg.TLSClientConfig.CAFile = true, ""
	}
	cfg.TLSClientConfig.CertFile, cfg.TLSClientConfig.KeyFile = k.CertFile, k.KeyFile
	return cfg, nil
}

// RESTConfig is c.Kube.RESTConfig, its errors naming where the deciding
// setting came from.
func (c *Config) RESTConfig(h Host) (*rest.Config, error) {
	cfg, err := c.Kube.RESTConfig(h)
	if err == nil {
		return cfg, nil
	}
	for _, k := range []Key{KeyKubeconfigInline, KeyKubeconfig, KeyK8sAPIEndpoint} {
		if s, ok := c.Sources[k]; ok {
			return nil, fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil, err
}

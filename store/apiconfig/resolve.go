package apiconfig

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/kdd"
)

// refused are the settings Calico knows that we cannot honour, with why and
// what to use instead; set anywhere they are an error naming where.
var refused = []struct {
	key Key
	why string
}{
	{KeyEtcdUsername, "etcd user/password authentication is not supported; use client certificates (etcdCertFile, etcdKeyFile)"},
	{KeyEtcdPassword, "etcd user/password authentication is not supported; use client certificates (etcdCertFile, etcdKeyFile)"},
	{KeyEtcdKey, "inline etcd certificates are not supported; put the key in a file and name it in etcdKeyFile"},
	{KeyEtcdCert, "inline etcd certificates are not supported; put the certificate in a file and name it in etcdCertFile"},
	{KeyEtcdCACert, "inline etcd certificates are not supported; put the CA in a file and name it in etcdCACertFile"},
}

// resolve checks the merged settings, picks the datastore and fills a
// Config. kubeHint says how a user of this front end names a way to the
// Kubernetes API.
func resolve(l layer, h Host, kubeHint string) (*Config, error) {
	c := &Config{InPod: h.inPod(), Sources: map[Key]Source{}}
	for k, v := range l {
		c.Sources[k] = v.src
	}
	if err := checkRefused(l); err != nil {
		return nil, err
	}
	t, err := datastoreType(l, c.InPod)
	if err != nil {
		return nil, err
	}
	c.Type = t.text
	c.Sources[KeyDatastoreType] = t.src
	if c.Etcd, err = etcdConfig(l, h, c.Type); err != nil {
		return nil, err
	}
	if c.Kube, err = kubeSettings(l); err != nil {
		return nil, err
	}
	if c.APIGroup, err = apiGroupSetting(l); err != nil {
		return nil, err
	}
	if c.Type == Kubernetes {
		if err := c.kubeDefaults(h, t.src, kubeHint); err != nil {
			return nil, err
		}
		c.Warnings = unusedEtcd(l)
	}
	return c, nil
}

// typed is the chosen datastore type and why.
type typed struct {
	text Type
	src  Source
}

// datastoreType is the type set, or the default: etcdv3 when etcd is
// configured or off Kubernetes (the embedded etcd), kubernetes in a pod.
func datastoreType(l layer, inPod bool) (typed, error) {
	if v, ok := l[KeyDatastoreType]; ok {
		switch Type(v.text) {
		case EtcdV3, Kubernetes:
			return typed{Type(v.text), v.src}, nil
		}
		return typed{}, fmt.Errorf("%s=%q: unknown datastore type, must be %s or %s", v.src, v.text, EtcdV3, Kubernetes)
	}
	_, listed := l[KeyEtcdEndpoints]
	if _, discover := l[KeyEtcdDiscoverySrv]; listed || discover {
		return typed{EtcdV3, SourceDefaultEtcdSet}, nil
	}
	if inPod {
		return typed{Kubernetes, SourceDefaultInPod}, nil
	}
	return typed{EtcdV3, SourceDefaultNotInPod}, nil
}

func checkRefused(l layer) error {
	for _, r := range refused {
		if v, ok := l[r.key]; ok {
			return fmt.Errorf("%s: %s", v.src, r.why)
		}
	}
	for _, k := range []Key{KeyK8sDisableNodePoll, KeyUsePodCIDR} {
		on, err := boolSetting(l, k)
		if err != nil {
			return err
		}
		if on {
			return fmt.Errorf("%s=true: not supported (IPAM blocks come from Calico's IP pools, and nodes are always watched); unset it", l[k].src)
		}
	}
	return nil
}

// apiGroupSetting is the API group of Calico's resource kinds set, or none
// (the backend then discovers it, as Calico's).
func apiGroupSetting(l layer) (kdd.APIGroup, error) {
	v, ok := l[KeyCalicoAPIGroup]
	if !ok {
		return "", nil
	}
	g, err := kdd.ParseAPIGroup(v.text)
	if err != nil {
		return "", fmt.Errorf("%s=%w", v.src, err)
	}
	return g, nil
}

// boolSetting parses a boolean setting (unset is false).
func boolSetting(l layer, k Key) (bool, error) {
	v, ok := l[k]
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(v.text)
	if err != nil {
		return false, fmt.Errorf("%s=%q: not a boolean (true or false)", v.src, v.text)
	}
	return b, nil
}

// etcdConfig is the etcd client's config: the endpoints listed or
// discovered (only when etcd is the datastore: DNS is not asked for an
// unused etcd); with neither, the embedded etcd's URL.
func etcdConfig(l layer, h Host, t Type) (store.Config, error) {
	cfg := store.Config{
		CAFile:   l[KeyEtcdCACertFile].text,
		CertFile: l[KeyEtcdCertFile].text,
		KeyFile:  l[KeyEtcdKeyFile].text,
	}
	eps, listed := l[KeyEtcdEndpoints]
	srv, discover := l[KeyEtcdDiscoverySrv]
	switch {
	case listed && discover:
		return store.Config{}, fmt.Errorf("%s and %s: multiple discovery or bootstrap options specified, use either \"etcdEndpoints\" or \"etcdDiscoverySrv\"", eps.src, srv.src)
	case discover && t == EtcdV3:
		found, err := discoverEtcd(h.LookupSRV, srv)
		if err != nil {
			return store.Config{}, err
		}
		cfg.Endpoints = found
	case listed:
		for _, e := range strings.Split(eps.text, ",") {
			if e = strings.TrimSpace(e); e == "" {
				continue
			}
			if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return store.Config{}, fmt.Errorf("%s: %q is not an http(s) URL", eps.src, e)
			}
			cfg.Endpoints = append(cfg.Endpoints, e)
		}
	}
	if len(cfg.Endpoints) == 0 {
		cfg.Endpoints = []string{store.DefaultEndpoint}
	}
	cert, key := l[KeyEtcdCertFile], l[KeyEtcdKeyFile]
	switch {
	case cert.text != "" && key.text == "":
		return store.Config{}, fmt.Errorf("%s is set but no etcd client key is (etcdKeyFile, ETCD_KEY_FILE): both or neither", cert.src)
	case key.text != "" && cert.text == "":
		return store.Config{}, fmt.Errorf("%s is set but no etcd client certificate is (etcdCertFile, ETCD_CERT_FILE): both or neither", key.src)
	}
	return cfg, nil
}

// kubeSettings are the Kubernetes API settings as given.
func kubeSettings(l layer) (Kube, error) {
	k := Kube{
		Kubeconfig:       l[KeyKubeconfig].text,
		KubeconfigInline: l[KeyKubeconfigInline].text,
		APIEndpoint:      l[KeyK8sAPIEndpoint].text,
		Token:            l[KeyK8sAPIToken].text,
		CertFile:         l[KeyK8sCertFile].text,
		KeyFile:          l[KeyK8sKeyFile].text,
		CAFile:           l[KeyK8sCAFile].text,
		CurrentContext:   l[KeyK8sCurrentContext].text,
	}
	var err error
	if k.InsecureSkipTLSVerify, err = boolSetting(l, KeyK8sInsecure); err != nil {
		return Kube{}, err
	}
	if v, ok := l[KeyK8sClientQPS]; ok {
		q, err := strconv.ParseFloat(v.text, 32)
		if err != nil || q < 0 {
			return Kube{}, fmt.Errorf("%s=%q: not a number of requests per second", v.src, v.text)
		}
		k.QPS = float32(q)
	}
	if v := l[KeyK8sAPIEndpoint]; strings.Contains(v.text, "://") {
		if u, err := url.Parse(v.text); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Kube{}, fmt.Errorf("%s: %q is not an http(s) URL", v.src, v.text)
		}
	}
	return k, nil
}

// kubeDefaults completes the Kubernetes settings as Calico does ($HOME's
// kubeconfig when nothing names the API) and refuses a Kubernetes datastore
// with no way to the API.
func (c *Config) kubeDefaults(h Host, typeSrc Source, kubeHint string) error {
	if c.Kube.set() {
		return nil
	}
	if home := h.Getenv("HOME"); home != "" {
		if p := filepath.Join(home, ".kube", "config"); h.exists(p) {
			c.Kube.Kubeconfig = p
			c.Sources[KeyKubeconfig] = SourceHomeKubeconfig
			return nil
		}
	}
	if h.Getenv("KUBERNETES_SERVICE_HOST") != "" && h.Getenv("KUBERNETES_SERVICE_PORT") != "" {
		return nil
	}
	return fmt.Errorf("datastore type kubernetes (%s) but no Kubernetes API to reach: set %s, "+
		"or run in a Kubernetes pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT)", typeSrc, kubeHint)
}

// unusedEtcd names the etcd settings a Kubernetes datastore does not use.
func unusedEtcd(l layer) []string {
	var out []string
	for _, k := range []Key{KeyEtcdEndpoints, KeyEtcdDiscoverySrv, KeyEtcdKeyFile, KeyEtcdCertFile, KeyEtcdCACertFile} {
		if v, ok := l[k]; ok {
			out = append(out, fmt.Sprintf("%s is set but the datastore is kubernetes: etcd settings are not used", v.src))
		}
	}
	return out
}

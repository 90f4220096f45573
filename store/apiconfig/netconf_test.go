package apiconfig

import (
	"strings"
	"testing"
)

// The netconf's keys override the environment, as in Calico's plugin; the
// policy section's Kubernetes access fills the same settings, with
// kubernetes.k8s_api_root over policy.k8s_api_root (its /api/v1 cut off).
func TestFromNetConf(t *testing.T) {
	env := map[string]string{"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": "http://env:2379", "KUBECONFIG": "/env/kubeconfig", "K8S_CA_FILE": "/env/ca"}
	n := NetConf{
		DatastoreType: "kubernetes", EtcdEndpoints: "http://conf:2379", Kubeconfig: "/conf/kubeconfig",
		PolicyK8sAPIRoot: "https://10.0.0.1:6443/api/v1/", PolicyK8sAuthToken: "tok",
		PolicyK8sClientCertificate: "/p/cert", PolicyK8sClientKey: "/p/key", PolicyK8sCertificateAuthority: "/p/ca",
	}
	cfg, err := FromNetConf(fakeHost(env, nil), n)
	if err != nil {
		t.Fatal(err)
	}
	want := Kube{Kubeconfig: "/conf/kubeconfig", APIEndpoint: "https://10.0.0.1:6443", Token: "tok", CertFile: "/p/cert", KeyFile: "/p/key", CAFile: "/p/ca"}
	if cfg.Type != Kubernetes || cfg.Kube != want {
		t.Errorf("type %s kube %+v\nwant kubernetes %+v", cfg.Type, cfg.Kube, want)
	}
	for k, src := range map[Key]Source{KeyDatastoreType: "netconf datastore_type", KeyEtcdEndpoints: "netconf etcd_endpoints",
		KeyK8sAPIEndpoint: "netconf policy.k8s_api_root", KeyK8sAPIToken: "netconf policy.k8s_auth_token"} {
		if got := cfg.Source(k); got != src {
			t.Errorf("source of %s: %q, want %q", k, got, src)
		}
	}
	if len(cfg.Warnings) != 1 || !strings.HasPrefix(cfg.Warnings[0], "netconf etcd_endpoints is set") {
		t.Errorf("warnings %q", cfg.Warnings)
	}

	n.K8sAPIRoot = "https://10.0.0.2:6443"
	if cfg, err = FromNetConf(fakeHost(env, nil), n); err != nil || cfg.Kube.APIEndpoint != n.K8sAPIRoot || cfg.Source(KeyK8sAPIEndpoint) != "netconf kubernetes.k8s_api_root" {
		t.Errorf("kubernetes.k8s_api_root: %+v %v", cfg.Kube, err)
	}

	// A silent netconf leaves the environment's values.
	cfg, err = FromNetConf(fakeHost(env, nil), NetConf{})
	if err != nil || cfg.Type != EtcdV3 || cfg.Etcd.Endpoints[0] != "http://env:2379" || cfg.Kube.Kubeconfig != "/env/kubeconfig" || cfg.Kube.CAFile != "/env/ca" {
		t.Errorf("from env: %+v %v", cfg, err)
	}
}

// Errors name the netconf key, and a Kubernetes datastore with no API named
// says which keys would name one.
func TestFromNetConfRefusals(t *testing.T) {
	for _, c := range []struct {
		n    NetConf
		want string
	}{
		{NetConf{DatastoreType: "etcd3"}, `netconf datastore_type="etcd3": unknown datastore type`},
		{NetConf{EtcdEndpoints: "http://a:2379,nope"}, `netconf etcd_endpoints: "nope" is not an http(s) URL`},
		{NetConf{EtcdKeyFile: "/k"}, "netconf etcd_key_file is set but no etcd client certificate is"},
		{NetConf{EtcdDiscoverySrv: "example.com"}, "netconf etcd_discovery_srv: no DNS resolver"},
		{NetConf{DatastoreType: "kubernetes"}, "datastore type kubernetes (netconf datastore_type) but no Kubernetes API to reach: set kubernetes.kubeconfig or kubernetes.k8s_api_root in the netconf"},
	} {
		_, err := FromNetConf(fakeHost(nil, nil), c.n)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.n, err, c.want)
		}
	}
}

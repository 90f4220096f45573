package apiconfig

import (
	"strings"
	"testing"
)

const fullFile = `apiVersion: projectcalico.org/v3
kind: CalicoAPIConfig
metadata: {}
spec:
  datastoreType: kubernetes
  etcdEndpoints: http://10.0.0.1:2379
  kubeconfig: /file/kubeconfig
  kubeconfigInline: "apiVersion: v1"
  k8sAPIEndpoint: https://10.0.0.9:6443
  k8sCertFile: /file/cert
  k8sKeyFile: /file/key
  k8sCAFile: /file/ca
  k8sAPIToken: tok
  k8sInsecureSkipTLSVerify: true
  k8sClientQPS: 40
  k8sCurrentContext: prod
  calicoAPIGroup: crd.projectcalico.org/v1
  usePodCIDR: false
`

// A config file, when there is one, is the whole configuration: the
// environment is not read (Calico's calicoctl); the flags still override.
func TestFromCalicoctlFile(t *testing.T) {
	env := map[string]string{"DATASTORE_TYPE": "etcdv3", "KUBECONFIG": "/env/kubeconfig", "ETCD_ENDPOINTS": "http://env:2379", "ETCD_CA_CERT_FILE": "/env/ca"}
	files := map[string]string{DefaultConfigPath: fullFile}
	cfg, err := FromCalicoctl(fakeHost(env, files), "", EtcdFlags{})
	if err != nil {
		t.Fatal(err)
	}
	want := Kube{Kubeconfig: "/file/kubeconfig", KubeconfigInline: "apiVersion: v1", APIEndpoint: "https://10.0.0.9:6443", Token: "tok", CertFile: "/file/cert",
		KeyFile: "/file/key", CAFile: "/file/ca", InsecureSkipTLSVerify: true, CurrentContext: "prod", QPS: 40}
	if cfg.Type != Kubernetes || cfg.Kube != want || cfg.Etcd.Endpoints[0] != "http://10.0.0.1:2379" || cfg.Etcd.CAFile != "" {
		t.Errorf("type %s etcd %v kube %+v\nwant kubernetes %+v", cfg.Type, cfg.Etcd.Endpoints, cfg.Kube, want)
	}
	if got := cfg.Source(KeyDatastoreType); got != DefaultConfigPath+" spec.datastoreType" {
		t.Errorf("source %q", got)
	}

	// JSON is YAML too; the flags beat the file.
	files["/tmp/c.json"] = `{"apiVersion":"projectcalico.org/v3","kind":"CalicoAPIConfig","spec":{"datastoreType":"etcdv3","etcdEndpoints":"http://file:2379","etcdCACertFile":"/file/ca"}}`
	cfg, err = FromCalicoctl(fakeHost(env, files), "/tmp/c.json", EtcdFlags{Endpoints: "http://flag:2379"})
	if err != nil || cfg.Type != EtcdV3 || strings.Join(cfg.Etcd.Endpoints, ",") != "http://flag:2379" || cfg.Etcd.CAFile != "/file/ca" {
		t.Errorf("json file with a flag: %+v %v", cfg, err)
	}

	// No file at the default path: the environment.
	cfg, err = FromCalicoctl(fakeHost(env, nil), DefaultConfigPath, EtcdFlags{})
	if err != nil || cfg.Type != EtcdV3 || cfg.Etcd.Endpoints[0] != "http://env:2379" || cfg.Source(KeyEtcdEndpoints) != "ETCD_ENDPOINTS" {
		t.Errorf("no file: %+v %v", cfg, err)
	}
}

// The file's errors read as Calico's, naming the file and the key.
func TestFromCalicoctlFileErrors(t *testing.T) {
	const head = "apiVersion: projectcalico.org/v3\nkind: CalicoAPIConfig\n"
	for _, c := range []struct {
		file, want string
	}{
		{"kind: CalicoAPIConfig\n", "syntax error in /c.cfg: invalid config file: unknown APIVersion ''"},
		{"apiVersion: projectcalico.org/v3\nkind: Frob\n", "syntax error in /c.cfg: invalid config file: expected kind 'CalicoAPIConfig', got 'Frob'"},
		{head + "spec:\n  etcdEndpoint: http://x:2379\n", `syntax error in /c.cfg: failed to parse config as YAML/JSON: error unmarshaling JSON: while decoding JSON: json: unknown field "etcdEndpoint"`},
		{head + "spec:\n  k8sInsecureSkipTLSVerify: maybe\n", "syntax error in /c.cfg: failed to parse config as YAML/JSON"},
		{head + "spec:\n  etcdKey: '-----BEGIN'\n", "/c.cfg spec.etcdKey: inline etcd certificates are not supported"},
		{head + "spec:\n  etcdUsername: root\n", "/c.cfg spec.etcdUsername: etcd user/password authentication is not supported"},
		{head + "spec:\n  usePodCIDR: true\n", "/c.cfg spec.usePodCIDR=true: not supported"},
		{head + "spec:\n  datastoreType: kubernetes\n", "set spec.kubeconfig or spec.k8sAPIEndpoint in /c.cfg"},
	} {
		_, err := FromCalicoctl(fakeHost(nil, map[string]string{"/c.cfg": c.file}), "/c.cfg", EtcdFlags{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.file, err, c.want)
		}
	}
	// A file named on the command line must exist.
	_, err := FromCalicoctl(fakeHost(nil, nil), "/missing.cfg", EtcdFlags{})
	if err == nil || !strings.HasPrefix(err.Error(), "Error reading config file: /missing.cfg") {
		t.Errorf("missing named file: %v", err)
	}
}

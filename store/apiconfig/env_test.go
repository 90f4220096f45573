package apiconfig

import (
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store"
)

const saDir = "/sa"

// fakeHost is an environment and a filesystem of named files.
func fakeHost(env, files map[string]string) Host {
	return Host{
		Getenv: func(k string) string { return env[k] },
		ReadFile: func(p string) ([]byte, error) {
			if s, ok := files[p]; ok {
				return []byte(s), nil
			}
			return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
		},
		ServiceAccountDir: saDir,
	}
}

var inPodEnv = map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}

// merged is a copy of a with b's entries over it.
func merged(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// The datastore type and where it came from: set, or our default (etcd off
// Kubernetes, the Kubernetes datastore in a pod with no etcd configured).
func TestFromEnvType(t *testing.T) {
	for _, c := range []struct {
		name     string
		env      map[string]string
		files    map[string]string
		wantType Type
		wantSrc  Source
	}{
		{"nothing set, off Kubernetes", nil, nil, EtcdV3, SourceDefaultNotInPod},
		{"pod by its service variables", inPodEnv, nil, Kubernetes, SourceDefaultInPod},
		{"pod with etcd configured", merged(inPodEnv, map[string]string{"ETCD_ENDPOINTS": "http://10.0.0.1:2379"}), nil, EtcdV3, SourceDefaultEtcdSet},
		{"set", map[string]string{"DATASTORE_TYPE": "etcdv3"}, nil, EtcdV3, "DATASTORE_TYPE"},
		{"set in a pod", merged(inPodEnv, map[string]string{"DATASTORE_TYPE": "etcdv3"}), nil, EtcdV3, "DATASTORE_TYPE"},
		{"CALICO_ prefix first", map[string]string{"DATASTORE_TYPE": "etcdv3", "CALICO_DATASTORE_TYPE": "kubernetes", "KUBECONFIG": "/k"}, nil, Kubernetes, "CALICO_DATASTORE_TYPE"},
		{"kubernetes by kubeconfig", map[string]string{"DATASTORE_TYPE": "kubernetes", "KUBECONFIG": "/k"}, nil, Kubernetes, "DATASTORE_TYPE"},
		{"kubernetes by $HOME's kubeconfig", map[string]string{"DATASTORE_TYPE": "kubernetes", "HOME": "/root"}, map[string]string{"/root/.kube/config": "x"}, Kubernetes, "DATASTORE_TYPE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := FromEnv(fakeHost(c.env, c.files), EtcdFlags{})
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Type != c.wantType || cfg.Source(KeyDatastoreType) != c.wantSrc {
				t.Errorf("type %s from %q, want %s from %q", cfg.Type, cfg.Source(KeyDatastoreType), c.wantType, c.wantSrc)
			}
		})
	}
}

// Every setting is read from Calico's variable, each remembering where it
// came from; the etcd flags override the environment.
func TestFromEnvSettings(t *testing.T) {
	env := map[string]string{
		"DATASTORE_TYPE": "kubernetes", "ETCD_ENDPOINTS": "http://10.0.0.1:2379, https://10.0.0.2:2379",
		"ETCD_CA_CERT_FILE": "/e/ca", "ETCD_CERT_FILE": "/e/cert", "ETCD_KEY_FILE": "/e/key",
		"KUBECONFIG": "/k/a:/k/b", "K8S_API_ENDPOINT": "https://10.0.0.9:6443", "K8S_CERT_FILE": "/k/cert",
		"K8S_KEY_FILE": "/k/key", "K8S_CA_FILE": "/k/ca", "K8S_INSECURE_SKIP_TLS_VERIFY": "true",
		"K8S_CURRENT_CONTEXT": "prod", "CALICO_K8SCLIENTQPS": "25.5", "CALICO_K8SAPITOKEN": "tok",
		"K8S_API_TOKEN": "not-read", "CALICO_API_GROUP": "crd.projectcalico.org/v1", "USE_POD_CIDR": "false",
	}
	cfg, err := FromEnv(fakeHost(env, nil), EtcdFlags{})
	if err != nil {
		t.Fatal(err)
	}
	wantKube := Kube{Kubeconfig: "/k/a:/k/b", APIEndpoint: "https://10.0.0.9:6443", Token: "tok", CertFile: "/k/cert",
		KeyFile: "/k/key", CAFile: "/k/ca", InsecureSkipTLSVerify: true, CurrentContext: "prod", QPS: 25.5}
	if cfg.Kube != wantKube {
		t.Errorf("kube %+v\nwant %+v", cfg.Kube, wantKube)
	}
	wantEtcd := store.Config{Endpoints: []string{"http://10.0.0.1:2379", "https://10.0.0.2:2379"}, CAFile: "/e/ca", CertFile: "/e/cert", KeyFile: "/e/key"}
	if !reflect.DeepEqual(cfg.Etcd, wantEtcd) {
		t.Errorf("etcd %+v, want %+v", cfg.Etcd, wantEtcd)
	}
	for k, want := range map[Key]Source{KeyK8sAPIToken: "CALICO_K8SAPITOKEN", KeyK8sInsecure: "K8S_INSECURE_SKIP_TLS_VERIFY", KeyEtcdCACertFile: "ETCD_CA_CERT_FILE", KeyCalicoAPIGroup: "CALICO_API_GROUP"} {
		if got := cfg.Source(k); got != want {
			t.Errorf("source of %s: %q, want %q", k, got, want)
		}
	}
	// Etcd settings in Kubernetes mode are valid but unused: said once each.
	if len(cfg.Warnings) != 4 || !strings.Contains(cfg.Warnings[0], "ETCD_ENDPOINTS is set but the datastore is kubernetes") {
		t.Errorf("warnings %q", cfg.Warnings)
	}

	env["DATASTORE_TYPE"] = "etcdv3"
	cfg, err = FromEnv(fakeHost(env, nil), EtcdFlags{Endpoints: "https://flag:2379", CAFile: "/f/ca"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Etcd.Endpoints, ",") != "https://flag:2379" || cfg.Etcd.CAFile != "/f/ca" || cfg.Etcd.KeyFile != "/e/key" ||
		cfg.Source(KeyEtcdEndpoints) != "--etcd-endpoints" || len(cfg.Warnings) != 0 {
		t.Errorf("flags over env: %+v from %q, warnings %q", cfg.Etcd, cfg.Source(KeyEtcdEndpoints), cfg.Warnings)
	}
}

// With nothing naming the API, the Kubernetes datastore uses $HOME's
// kubeconfig when there is one, and says so.
func TestFromEnvHomeKubeconfig(t *testing.T) {
	h := fakeHost(map[string]string{"DATASTORE_TYPE": "kubernetes", "HOME": "/root"}, map[string]string{"/root/.kube/config": "x"})
	cfg, err := FromEnv(h, EtcdFlags{})
	if err != nil || cfg.Kube.Kubeconfig != "/root/.kube/config" || cfg.Source(KeyKubeconfig) != SourceHomeKubeconfig {
		t.Errorf("%+v from %q: %v", cfg.Kube, cfg.Source(KeyKubeconfig), err)
	}
	// An endpoint names the API: no default kubeconfig then.
	h = fakeHost(map[string]string{"DATASTORE_TYPE": "kubernetes", "HOME": "/root", "K8S_API_ENDPOINT": "https://api:6443"}, map[string]string{"/root/.kube/config": "x"})
	if cfg, err = FromEnv(h, EtcdFlags{}); err != nil || cfg.Kube.Kubeconfig != "" {
		t.Errorf("with an endpoint: %+v %v", cfg.Kube, err)
	}
}

// With no endpoints, etcd is the embedded member's URL and says so.
func TestFromEnvEmbeddedEtcd(t *testing.T) {
	cfg, err := FromEnv(fakeHost(nil, nil), EtcdFlags{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Etcd, store.Config{Endpoints: []string{store.DefaultEndpoint}}) || cfg.Source(KeyEtcdEndpoints) != SourceDefault || cfg.InPod {
		t.Errorf("%+v from %q, in pod %v", cfg.Etcd, cfg.Source(KeyEtcdEndpoints), cfg.InPod)
	}
}

// Bad, contradictory or unsupported input is an error naming the variable.
func TestFromEnvRefusals(t *testing.T) {
	for _, c := range []struct {
		env   map[string]string
		files map[string]string
		want  string
	}{
		{map[string]string{"DATASTORE_TYPE": "etcd"}, nil, `DATASTORE_TYPE="etcd": unknown datastore type, must be etcdv3 or kubernetes`},
		{map[string]string{"DATASTORE_TYPE": "kubernetes"}, nil, "datastore type kubernetes (DATASTORE_TYPE) but no Kubernetes API to reach: set KUBECONFIG or K8S_API_ENDPOINT"},
		{map[string]string{"DATASTORE_TYPE": "kubernetes", "HOME": "/root"}, nil, "no Kubernetes API to reach"},
		// A mounted token alone marks a pod but says nothing of where the API is.
		{nil, map[string]string{saDir + "/token": "t"}, "datastore type kubernetes (" + string(SourceDefaultInPod) + ") but no Kubernetes API to reach"},
		{map[string]string{"ETCD_ENDPOINTS": "10.0.0.1:2379"}, nil, `ETCD_ENDPOINTS: "10.0.0.1:2379" is not an http(s) URL`},
		{map[string]string{"ETCD_CERT_FILE": "/c"}, nil, "ETCD_CERT_FILE is set but no etcd client key is"},
		{map[string]string{"ETCD_KEY_FILE": "/k"}, nil, "ETCD_KEY_FILE is set but no etcd client certificate is"},
		{map[string]string{"ETCD_USERNAME": "u"}, nil, "ETCD_USERNAME: etcd user/password authentication is not supported"},
		{map[string]string{"CALICO_ETCD_PASSWORD": "p"}, nil, "CALICO_ETCD_PASSWORD: etcd user/password authentication is not supported"},
		{map[string]string{"ETCD_DISCOVERY_SRV": "example.com", "ETCD_ENDPOINTS": "http://a:2379"}, nil, `ETCD_ENDPOINTS and ETCD_DISCOVERY_SRV: multiple discovery or bootstrap options specified, use either "etcdEndpoints" or "etcdDiscoverySrv"`},
		{map[string]string{"USE_POD_CIDR": "true"}, nil, "USE_POD_CIDR=true: not supported"},
		{map[string]string{"K8S_DISABLE_NODE_POLL": "1"}, nil, "K8S_DISABLE_NODE_POLL=true: not supported"},
		{map[string]string{"USE_POD_CIDR": "maybe"}, nil, `USE_POD_CIDR="maybe": not a boolean`},
		{map[string]string{"K8S_INSECURE_SKIP_TLS_VERIFY": "yes"}, nil, `K8S_INSECURE_SKIP_TLS_VERIFY="yes": not a boolean`},
		{map[string]string{"CALICO_K8SCLIENTQPS": "fast"}, nil, `CALICO_K8SCLIENTQPS="fast": not a number`},
		{map[string]string{"CALICO_API_GROUP": "projectcalico.org/v1"}, nil, `CALICO_API_GROUP="projectcalico.org/v1": want crd.projectcalico.org/v1 or projectcalico.org/v3`},
		{map[string]string{"K8S_API_ENDPOINT": "ftp://api"}, nil, `K8S_API_ENDPOINT: "ftp://api" is not an http(s) URL`},
	} {
		_, err := FromEnv(fakeHost(c.env, c.files), EtcdFlags{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: error %v, want one containing %q", c.env, c.files, err, c.want)
		}
	}
}

// The log line names the datastore, how it is reached and where each came
// from, and never the token.
func TestLogAttrs(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "[datastore etcdv3 datastoreFrom " + string(SourceDefaultNotInPod) + " etcdEndpoints http://127.0.0.1:2379 etcdEndpointsFrom default]"},
		{map[string]string{"ETCD_ENDPOINTS": "http://a:2379,http://b:2379"}, "[datastore etcdv3 datastoreFrom " + string(SourceDefaultEtcdSet) + " etcdEndpoints http://a:2379,http://b:2379 etcdEndpointsFrom ETCD_ENDPOINTS]"},
		{map[string]string{"DATASTORE_TYPE": "kubernetes", "KUBECONFIG": "/k", "CALICO_K8SAPITOKEN": "secret"}, "[datastore kubernetes datastoreFrom DATASTORE_TYPE kubeconfig /k kubeconfigFrom KUBECONFIG]"},
		{map[string]string{"DATASTORE_TYPE": "kubernetes", "K8S_API_ENDPOINT": "https://api:6443", "CALICO_K8SAPITOKEN": "secret"}, "[datastore kubernetes datastoreFrom DATASTORE_TYPE k8sAPIEndpoint https://api:6443 k8sAPIEndpointFrom K8S_API_ENDPOINT]"},
		{inPodEnv, "[datastore kubernetes datastoreFrom " + string(SourceDefaultInPod) + " kubeconfig (in-cluster service account)]"},
	} {
		cfg, err := FromEnv(fakeHost(c.env, nil), EtcdFlags{})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(cfg.LogAttrs()); got != c.want {
			t.Errorf("%v:\n got %s\nwant %s", c.env, got, c.want)
		}
	}
}

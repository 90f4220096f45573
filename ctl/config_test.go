package ctl

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// calicoctl's datastore as Calico's calicoctl resolves it: the config file
// when it exists, and then only the file (the environment is not read);
// the --etcd-* flags over either; with no file at the default path, the
// environment; --timeout bounds each call.
func TestDatastoreConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "calicoctl.cfg")
	cfgText := `apiVersion: projectcalico.org/v3
kind: CalicoAPIConfig
metadata: {}
spec:
  datastoreType: etcdv3
  etcdEndpoints: http://10.0.0.1:2379,http://10.0.0.2:2379
  etcdCACertFile: /file/ca.pem
`
	if err := os.WriteFile(file, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	d := datastoreFlags{config: file, timeout: 3 * time.Second}
	cfg, err := d.datastore(env(nil))
	if err != nil || strings.Join(cfg.Etcd.Endpoints, ",") != "http://10.0.0.1:2379,http://10.0.0.2:2379" || cfg.Etcd.CAFile != "/file/ca.pem" {
		t.Errorf("from file: %+v %v", cfg, err)
	}
	if cfg.Etcd.RequestTimeout != 3*time.Second || cfg.Etcd.DialTimeout != 3*time.Second {
		t.Errorf("--timeout: %+v", cfg.Etcd)
	}
	// Calico's rule: an existing file is read instead of the environment.
	cfg, err = d.datastore(env(map[string]string{"ETCD_ENDPOINTS": "http://env:2379", "ETCD_CA_CERT_FILE": "/env/ca.pem", "DATASTORE_TYPE": "kubernetes"}))
	if err != nil || strings.Join(cfg.Etcd.Endpoints, ",") != "http://10.0.0.1:2379,http://10.0.0.2:2379" || cfg.Etcd.CAFile != "/file/ca.pem" {
		t.Errorf("file, not env: %+v %v", cfg, err)
	}
	d.endpoints, d.caFile = "http://flag:2379", "/flag/ca.pem"
	cfg, _ = d.datastore(env(map[string]string{"ETCD_ENDPOINTS": "http://env:2379"}))
	if strings.Join(cfg.Etcd.Endpoints, ",") != "http://flag:2379" || cfg.Etcd.CAFile != "/flag/ca.pem" {
		t.Errorf("flag over file: %+v", cfg)
	}
	none := datastoreFlags{config: filepath.Join(dir, "missing.cfg")}
	if _, err := none.datastore(env(nil)); err == nil {
		t.Errorf("an explicitly named, missing config file was accepted")
	}
	// No file at the default path: the environment, else the embedded
	// etcd's URL.
	def := datastoreFlags{}
	cfg, err = def.datastore(env(nil))
	if err != nil || strings.Join(cfg.Etcd.Endpoints, ",") != "http://127.0.0.1:2379" {
		t.Errorf("default: %+v %v", cfg, err)
	}
	cfg, err = def.datastore(env(map[string]string{"ETCD_ENDPOINTS": "http://env:2379"}))
	if err != nil || strings.Join(cfg.Etcd.Endpoints, ",") != "http://env:2379" {
		t.Errorf("env without a file: %+v %v", cfg, err)
	}
	if _, err := def.datastore(env(map[string]string{"DATASTORE_TYPE": "etcd"})); err == nil || !strings.Contains(err.Error(), `DATASTORE_TYPE="etcd": unknown datastore type`) {
		t.Errorf("unknown datastore type: %v", err)
	}
	bad := filepath.Join(dir, "bad.cfg")
	_ = os.WriteFile(bad, []byte("apiVersion: projectcalico.org/v3\nkind: Frob\n"), 0o600)
	if _, err := (&datastoreFlags{config: bad}).datastore(env(nil)); err == nil || !strings.Contains(err.Error(), "CalicoAPIConfig") {
		t.Errorf("wrong kind in config file: %v", err)
	}
}

// With the Kubernetes datastore, the classic container and profile verbs
// are refused as etcd-only (as in Calico) before anything is done; other
// verbs reach apiconfig.Open, which refuses the datastore until its backend
// is wired in.
func TestKubernetesDatastoreVerbs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "calicoctl.cfg")
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	text := "apiVersion: projectcalico.org/v3\nkind: CalicoAPIConfig\nspec:\n  datastoreType: kubernetes\n  kubeconfig: " + kc + "\n"
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"container", "add", "/var/run/netns/x", "ipv4", "--hostname", "n1"}, "calicoctl container: not available with the Kubernetes datastore (datastore type kubernetes from " + file + " spec.datastoreType)"},
		{[]string{"profile", "show"}, "calicoctl profile: not available with the Kubernetes datastore"},
		{[]string{"profile", "add", "p1"}, "etcd only, as in Calico"},
		{[]string{"get", "ippools"}, "cannot connect to the Kubernetes datastore"},
	} {
		var out, errOut bytes.Buffer
		code := Main(append(c.args, "-c", file), IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }})
		if code == 0 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want a failure saying %q", c.args, code, errOut.String(), c.want)
		}
	}
}

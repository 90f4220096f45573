package ctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
	d := datastoreFlags{config: file}
	cfg, err := d.storeConfig(env(nil))
	if err != nil || strings.Join(cfg.Endpoints, ",") != "http://10.0.0.1:2379,http://10.0.0.2:2379" || cfg.CAFile != "/file/ca.pem" {
		t.Errorf("from file: %+v %v", cfg, err)
	}
	cfg, _ = d.storeConfig(env(map[string]string{"ETCD_ENDPOINTS": "http://env:2379", "ETCD_CA_CERT_FILE": "/env/ca.pem"}))
	if strings.Join(cfg.Endpoints, ",") != "http://env:2379" || cfg.CAFile != "/env/ca.pem" {
		t.Errorf("env over file: %+v", cfg)
	}
	d.endpoints, d.caFile = "http://flag:2379", "/flag/ca.pem"
	cfg, _ = d.storeConfig(env(map[string]string{"ETCD_ENDPOINTS": "http://env:2379"}))
	if strings.Join(cfg.Endpoints, ",") != "http://flag:2379" || cfg.CAFile != "/flag/ca.pem" {
		t.Errorf("flag over env: %+v", cfg)
	}
	// No file at the default path and nothing set: the embedded etcd's URL.
	none := datastoreFlags{config: filepath.Join(dir, "missing.cfg")}
	if _, err := none.storeConfig(env(nil)); err == nil {
		t.Errorf("an explicitly named, missing config file was accepted")
	}
	def := datastoreFlags{}
	cfg, err = def.storeConfig(env(nil))
	if err != nil || strings.Join(cfg.Endpoints, ",") != "http://127.0.0.1:2379" {
		t.Errorf("default: %+v %v", cfg, err)
	}
	if _, err := def.storeConfig(env(map[string]string{"DATASTORE_TYPE": "kubernetes"})); err == nil || !strings.Contains(err.Error(), "kubernetes") {
		t.Errorf("kubernetes datastore: %v", err)
	}
	if _, err := def.storeConfig(env(map[string]string{"DATASTORE_TYPE": "etcd"})); err == nil || !strings.Contains(err.Error(), "must be etcdv3 or kubernetes") {
		t.Errorf("unknown datastore type: %v", err)
	}
	bad := filepath.Join(dir, "bad.cfg")
	_ = os.WriteFile(bad, []byte("kind: Frob\n"), 0o600)
	if _, err := (&datastoreFlags{config: bad}).storeConfig(env(nil)); err == nil || !strings.Contains(err.Error(), "CalicoAPIConfig") {
		t.Errorf("wrong kind in config file: %v", err)
	}
}

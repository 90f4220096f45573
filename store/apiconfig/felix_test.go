package apiconfig

import (
	"strings"
	"testing"
)

// calico-node also reads Felix's own datastore variables over the common
// ones, as Calico's Felix does: etcd endpoints there mean etcdv3.
func TestFromEnvFelixVariables(t *testing.T) {
	for _, c := range []struct {
		name     string
		env      map[string]string
		wantType Type
		wantEps  string
		wantSrc  Source
	}{
		{"type", map[string]string{"DATASTORE_TYPE": "kubernetes", "FELIX_DATASTORETYPE": "etcdv3"}, EtcdV3, "http://127.0.0.1:2379", "FELIX_DATASTORETYPE"},
		{"endpoints", merged(inPodEnv, map[string]string{"ETCD_ENDPOINTS": "http://common:2379", "FELIX_ETCDENDPOINTS": "https://felix:2379"}), EtcdV3, "https://felix:2379", "FELIX_ETCDENDPOINTS"},
		{"addr", map[string]string{"FELIX_ETCDADDR": "10.0.0.1:2379"}, EtcdV3, "http://10.0.0.1:2379", "FELIX_ETCDADDR"},
		{"addr and scheme", map[string]string{"FELIX_ETCDADDR": "10.0.0.1:2379", "FELIX_ETCDSCHEME": "https"}, EtcdV3, "https://10.0.0.1:2379", "FELIX_ETCDADDR"},
		{"endpoints over addr", map[string]string{"FELIX_ETCDADDR": "10.0.0.1:2379", "FELIX_ETCDENDPOINTS": "http://e:2379"}, EtcdV3, "http://e:2379", "FELIX_ETCDENDPOINTS"},
		{"etcd endpoints over felix's type", map[string]string{"FELIX_DATASTORETYPE": "etcdv3", "FELIX_ETCDADDR": "a:1"}, EtcdV3, "http://a:1", "FELIX_ETCDADDR"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := FromEnv(fakeHost(c.env, nil), EtcdFlags{})
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Type != c.wantType || strings.Join(cfg.Etcd.Endpoints, ",") != c.wantEps || cfg.Source(KeyDatastoreType) != c.wantSrc {
				t.Errorf("%s %v from %q, want %s %s from %q", cfg.Type, cfg.Etcd.Endpoints, cfg.Source(KeyDatastoreType), c.wantType, c.wantEps, c.wantSrc)
			}
		})
	}
	cfg, err := FromEnv(fakeHost(map[string]string{"FELIX_ETCDKEYFILE": "/k", "FELIX_ETCDCERTFILE": "/c", "FELIX_ETCDCAFILE": "/ca", "ETCD_CA_CERT_FILE": "/common"}, nil), EtcdFlags{})
	if err != nil || cfg.Etcd.KeyFile != "/k" || cfg.Etcd.CertFile != "/c" || cfg.Etcd.CAFile != "/ca" || cfg.Source(KeyEtcdCACertFile) != "FELIX_ETCDCAFILE" {
		t.Errorf("TLS files: %+v %v", cfg.Etcd, err)
	}
	cfg, err = FromEnv(fakeHost(map[string]string{"FELIX_ETCDSCHEME": "https"}, nil), EtcdFlags{})
	if err != nil || len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], "FELIX_ETCDSCHEME is set without FELIX_ETCDADDR") {
		t.Errorf("scheme alone: %v %q", err, cfg.Warnings)
	}

	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"DATASTORE_TYPE": "kubernetes", "KUBECONFIG": "/k", "FELIX_ETCDENDPOINTS": "http://e:2379"}, "FELIX_ETCDENDPOINTS names etcd but DATASTORE_TYPE=kubernetes"},
		{map[string]string{"FELIX_DATASTORETYPE": "kubernetes", "FELIX_ETCDADDR": "a:1"}, "FELIX_ETCDADDR names etcd but FELIX_DATASTORETYPE=kubernetes"},
		{map[string]string{"FELIX_ETCDADDR": "a:1", "FELIX_ETCDSCHEME": "ftp"}, `FELIX_ETCDSCHEME="ftp": must be http or https`},
		{map[string]string{"FELIX_DATASTORETYPE": "kdd"}, `FELIX_DATASTORETYPE="kdd": unknown datastore type`},
	} {
		if _, err := FromEnv(fakeHost(c.env, nil), EtcdFlags{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.env, err, c.want)
		}
	}
}

package config

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/apiconfig"
)

// The datastore is apiconfig.FromEnv's choice over the --etcd-* flags: the
// embedded etcd only off Kubernetes with no etcd configured; in a pod with
// no etcd, the Kubernetes datastore (never an embedded etcd per node);
// Felix's own FELIX_ETCD* variables are read; the flags win over the
// environment.
func TestParseFlagsDatastore(t *testing.T) {
	pod := map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	for _, c := range []struct {
		name     string
		env      map[string]string
		args     []string
		wantType apiconfig.Type
		embedded bool
		wantEps  string
	}{
		{name: "nothing set", wantType: apiconfig.EtcdV3, embedded: true, wantEps: "http://127.0.0.1:2379"},
		{name: "etcdv3 set", env: map[string]string{"DATASTORE_TYPE": "etcdv3"}, wantType: apiconfig.EtcdV3, embedded: true, wantEps: "http://127.0.0.1:2379"},
		{name: "ETCD_ENDPOINTS", env: map[string]string{"ETCD_ENDPOINTS": "http://10.0.0.1:2379"}, wantType: apiconfig.EtcdV3, wantEps: "http://10.0.0.1:2379"},
		{name: "flag over env", env: map[string]string{"ETCD_ENDPOINTS": "http://10.0.0.1:2379"}, args: []string{"--etcd-endpoints", "http://10.0.0.2:2379"}, wantType: apiconfig.EtcdV3, wantEps: "http://10.0.0.2:2379"},
		{name: "FELIX_ETCDADDR", env: map[string]string{"FELIX_ETCDADDR": "10.0.0.3:2379"}, wantType: apiconfig.EtcdV3, wantEps: "http://10.0.0.3:2379"},
		{name: "pod, no etcd", env: pod, wantType: apiconfig.Kubernetes},
		{name: "pod with etcd", env: merged(pod, map[string]string{"ETCD_ENDPOINTS": "http://10.0.0.1:2379"}), wantType: apiconfig.EtcdV3, wantEps: "http://10.0.0.1:2379"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := merged(map[string]string{"NODENAME": "n1"}, c.env)
			cfg, err := ParseFlags(c.args, func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Datastore.Type != c.wantType || cfg.EmbeddedEtcd() != c.embedded {
				t.Errorf("type %s embedded %v, want %s %v", cfg.Datastore.Type, cfg.EmbeddedEtcd(), c.wantType, c.embedded)
			}
			if got := strings.Join(cfg.Datastore.Etcd.Endpoints, ","); c.wantEps != "" && got != c.wantEps {
				t.Errorf("endpoints %s, want %s", got, c.wantEps)
			}
		})
	}
}

// Bad datastore settings stop the agent at start with an error naming the
// variable; a pod whose API cannot be reached (no port, no kubeconfig)
// says so rather than fall back to an embedded etcd.
func TestParseFlagsDatastoreRefused(t *testing.T) {
	for env, want := range map[string]string{
		"DATASTORE_TYPE=etcd":               `DATASTORE_TYPE="etcd": unknown datastore type, must be etcdv3 or kubernetes`,
		"KUBERNETES_SERVICE_HOST=10.96.0.1": "datastore type kubernetes (default (in a Kubernetes pod, no etcd configured)) but no Kubernetes API to reach",
		"ETCD_ENDPOINTS=10.0.0.1:2379":      `ETCD_ENDPOINTS: "10.0.0.1:2379" is not an http(s) URL`,
		"ETCD_USERNAME=u":                   "ETCD_USERNAME: etcd user/password authentication is not supported",
		"DATASTORE_TYPE=kubernetes":         "datastore type kubernetes (DATASTORE_TYPE) but no Kubernetes API to reach",
		"FELIX_DATASTORETYPE=kubernetes":    "datastore type kubernetes (FELIX_DATASTORETYPE) but no Kubernetes API to reach",
	} {
		k, v, _ := strings.Cut(env, "=")
		m := map[string]string{"NODENAME": "n1", k: v}
		if _, err := ParseFlags(nil, func(k string) string { return m[k] }); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", env, err, want)
		}
	}
}

// Felix's datastore variables are read by the datastore choice, so the
// FELIX_* settings loader does not call them "not honoured".
func TestFelixDatastoreVarsNotReportedUnhonoured(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)
	var environ []string
	for _, k := range felixDatastoreEnv {
		environ = append(environ, k+"=x")
	}
	if _, err := ParseFelixEnv(append(environ, "FELIX_NOSUCHSETTING=1")); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); strings.Count(out, "not honoured") != 1 || !strings.Contains(out, "FELIX_NOSUCHSETTING") {
		t.Errorf("log: %s; want exactly FELIX_NOSUCHSETTING reported", out)
	}
}

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

// Docker's libnetwork driver lives in etcd only, as in Calico: refused at
// start with the Kubernetes datastore, served with etcd.
func TestParseFlagsLibnetworkEtcdOnly(t *testing.T) {
	env := map[string]string{"NODENAME": "n1", "CALICO_LIBNETWORK_ENABLED": "true", "DATASTORE_TYPE": "kubernetes", "KUBECONFIG": "/k"}
	_, err := ParseFlags(nil, func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "--libnetwork (CALICO_LIBNETWORK_ENABLED)") || !strings.Contains(err.Error(), "from DATASTORE_TYPE") {
		t.Errorf("libnetwork with kubernetes: %v", err)
	}
	env["DATASTORE_TYPE"] = "etcdv3"
	if cfg, err := ParseFlags(nil, func(k string) string { return env[k] }); err != nil || !cfg.Libnetwork {
		t.Errorf("libnetwork with etcd: %v", err)
	}
}

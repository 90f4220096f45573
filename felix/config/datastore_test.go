package config

import (
	"strings"
	"testing"
)

// DATASTORE_TYPE is read as Calico reads it: etcdv3 runs, kubernetes is
// refused until the Kubernetes datastore exists, anything else names the
// value; in a Kubernetes pod an unset etcd never falls back to a private
// embedded etcd.
func TestCheckDatastore(t *testing.T) {
	for _, c := range []struct {
		env           map[string]string
		inPod, etcd   bool
		wantErrSubstr string
	}{
		{env: nil},
		{env: map[string]string{"DATASTORE_TYPE": "etcdv3"}},
		{env: map[string]string{"DATASTORE_TYPE": "etcdv3"}, inPod: true, etcd: true},
		{env: nil, inPod: true, etcd: true},
		{env: map[string]string{"DATASTORE_TYPE": "kubernetes"}, wantErrSubstr: "DATASTORE_TYPE=kubernetes: the Kubernetes datastore is not supported yet"},
		{env: map[string]string{"DATASTORE_TYPE": "kubernetes"}, etcd: true, wantErrSubstr: "DATASTORE_TYPE=kubernetes"},
		{env: map[string]string{"DATASTORE_TYPE": "etcd"}, wantErrSubstr: `DATASTORE_TYPE="etcd": must be etcdv3 or kubernetes`},
		{env: nil, inPod: true, wantErrSubstr: "running in a Kubernetes pod with no ETCD_ENDPOINTS"},
		{env: map[string]string{"DATASTORE_TYPE": "etcdv3"}, inPod: true, wantErrSubstr: "running in a Kubernetes pod with no ETCD_ENDPOINTS"},
	} {
		err := checkDatastore(func(k string) string { return c.env[k] }, c.inPod, c.etcd)
		switch {
		case c.wantErrSubstr == "" && err != nil:
			t.Errorf("%v pod=%v etcd=%v: %v", c.env, c.inPod, c.etcd, err)
		case c.wantErrSubstr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErrSubstr)):
			t.Errorf("%v pod=%v etcd=%v: error %v, want one containing %q", c.env, c.inPod, c.etcd, err, c.wantErrSubstr)
		}
	}
}

// The Kubernetes service variables mark a pod, and ParseFlags applies the
// check: the agent never gets as far as starting an embedded etcd.
func TestParseFlagsDatastoreInPod(t *testing.T) {
	env := map[string]string{"NODENAME": "n1", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}
	if _, err := ParseFlags(nil, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "ETCD_ENDPOINTS") {
		t.Fatalf("in a pod with no etcd: %v, want a refusal naming ETCD_ENDPOINTS", err)
	}
	env["ETCD_ENDPOINTS"] = "http://10.0.0.1:2379"
	if _, err := ParseFlags(nil, func(k string) string { return env[k] }); err != nil {
		t.Fatalf("in a pod with etcd: %v", err)
	}
}

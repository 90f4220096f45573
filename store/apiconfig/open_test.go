package apiconfig

import (
	"strings"
	"testing"
)

// Open makes the etcd client for etcdv3 (contacting nothing) and refuses
// the Kubernetes datastore, naming where its type came from, until its
// backend is wired in.
func TestOpen(t *testing.T) {
	h := fakeHost(map[string]string{"ETCD_ENDPOINTS": "http://127.0.0.1:1"}, nil)
	cfg, err := FromEnv(h, EtcdFlags{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(cfg, h)
	if err != nil {
		t.Fatalf("etcdv3: %v", err)
	}
	_ = c.Close()

	h = fakeHost(merged(inPodEnv, nil), nil)
	if cfg, err = FromEnv(h, EtcdFlags{}); err != nil {
		t.Fatal(err)
	}
	// The Kubernetes backend is built from the in-cluster config: here the
	// pod's token file is missing, and the error names it.
	if _, err = Open(cfg, h); err == nil || !strings.Contains(err.Error(), "service account token") {
		t.Errorf("kubernetes in a pod without its token: %v", err)
	}
	if _, _, err = OpenKube(cfg, h); err == nil || !strings.Contains(err.Error(), "service account token") {
		t.Errorf("OpenKube in a pod without its token: %v", err)
	}
	if _, _, err = OpenKube(&Config{Type: EtcdV3}, h); err == nil || !strings.Contains(err.Error(), "not kubernetes") {
		t.Errorf("OpenKube of etcdv3: %v", err)
	}
	if _, err = Open(&Config{Type: "etcd"}, h); err == nil {
		t.Errorf("an unknown type was opened")
	}
}

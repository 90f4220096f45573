package apiconfig

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
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

// The client OpenKubeUnlimited makes (calico-node's, for the CNI calls it
// serves) has no client-side rate limit: a burst of requests all reach the
// API server at once, where OpenKube's client (50 requests/s after a
// burst of 100) holds the rest back; a k8sClientQPS the user set applies
// to both.
func TestOpenKubeUnlimited(t *testing.T) {
	const burst = 250 // OpenKube's limiter admits these over 3 s
	var mu sync.Mutex
	arrived, all := 0, make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if arrived++; arrived == burst {
			close(all)
		}
		mu.Unlock()
		select { // answer once every request of the burst is in
		case <-all:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}`)
		case <-time.After(1500 * time.Millisecond):
			http.Error(w, "the burst did not arrive", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	inBurst := func(t *testing.T, env map[string]string, open func(*Config, Host) (*store.Client, *k8s.Client, error)) (failed int) {
		t.Helper()
		mu.Lock()
		arrived, all = 0, make(chan struct{})
		mu.Unlock()
		h := fakeHost(merged(map[string]string{"DATASTORE_TYPE": "kubernetes", "K8S_API_ENDPOINT": srv.URL}, env), nil)
		cfg, err := FromEnv(h, EtcdFlags{})
		if err != nil {
			t.Fatal(err)
		}
		_, kc, err := open(cfg, h)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		errs := make(chan error, burst)
		for range burst {
			go func() { _, err := kc.GetNode(ctx, "n"); errs <- err }()
		}
		for range burst {
			if <-errs != nil {
				failed++
			}
		}
		return failed
	}
	if n := inBurst(t, nil, OpenKubeUnlimited); n != 0 {
		t.Errorf("OpenKubeUnlimited: %d of %d requests held back", n, burst)
	}
	if n := inBurst(t, nil, OpenKube); n == 0 {
		t.Errorf("OpenKube: no request held back by its rate limit")
	}
	if n := inBurst(t, map[string]string{"CALICO_K8SCLIENTQPS": "20"}, OpenKubeUnlimited); n == 0 {
		t.Errorf("OpenKubeUnlimited with k8sClientQPS 20: no request held back")
	}
}

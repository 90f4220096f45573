package kube_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/kube"
	"github.com/calico-aio/calico-aio/store/model"
)

// versions records the resourceVersion each request asked for, and which
// of them the apiserver refused with 429.
type versions struct {
	next    http.RoundTripper
	mu      sync.Mutex
	got     []string
	refused []int // indexes into got
}

func (v *versions) RoundTrip(req *http.Request) (*http.Response, error) {
	v.mu.Lock()
	i := len(v.got)
	v.got = append(v.got, req.URL.Query().Get("resourceVersion"))
	v.mu.Unlock()
	resp, err := v.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		v.mu.Lock()
		v.refused = append(v.refused, i)
		v.mu.Unlock()
	}
	return resp, err
}

// recordedBackend is a backend on c whose requests v records.
func recordedBackend(t *testing.T, c *cluster) (*kube.Backend, *versions) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kapi.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	v := &versions{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { v.next = rt; return v })
	kc, err := k8s.NewClientFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kube.NewWithClient(kc), v
}

func (v *versions) take() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	got := v.got
	v.got = nil
	return got
}

// checkRecentReads: under model.RecentReads a get asks the watch cache
// (resourceVersion 0) and reads again at the latest what the cache lacks,
// so that an object just created is found; ReadMany (the IPAM's snapshot)
// takes the cache's answer, a missing one included; other reads are of
// the latest.
func checkRecentReads(t *testing.T, c *cluster) {
	b, v := recordedBackend(t, c)
	ctx := context.Background()
	recent := model.RecentReads(ctx)
	for i, s := range samples("recent", 2) {
		if s.key.Kind != "IPPool" && s.key.Kind != model.KindIPAMHandle {
			continue
		}
		if _, err := b.Create(ctx, s.key, s.value(1)); err != nil {
			t.Fatal(err)
		}
		v.take()
		if _, err := b.Get(recent, s.key); err != nil { // at once: the cache may not have it yet
			t.Errorf("%d: recent get of %s just created: %v", i, s.key, err)
		}
		if got := v.take(); len(got) == 0 || got[0] != "0" || len(got) > 2 || len(got) == 2 && got[1] != "" {
			t.Errorf("recent get of %s asked for versions %q, want the cache's (0), then perhaps the latest", s.key, got)
		}
	}
	missing := model.Key{Kind: "IPPool", Name: "recent-missing"}
	if _, err := b.Get(recent, missing); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("recent get of a missing pool: %v, want not found", err)
	}
	if got := v.take(); len(got) != 2 || got[0] != "0" || got[1] != "" {
		t.Errorf("recent get of a missing pool asked for versions %q, want the cache's then the latest", got)
	}
	if _, err := b.ReadMany(recent, []model.Read{{Key: missing}, {List: &model.ListOptions{Kind: "IPPool"}}}); err != nil {
		t.Fatal(err)
	}
	if got := v.take(); len(got) != 2 || got[0] != "0" || got[1] != "0" {
		t.Errorf("recent ReadMany asked for versions %q, want the cache's for both reads", got)
	}
	if _, err := b.Get(ctx, missing); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("get of a missing pool: %v", err)
	}
	if got := v.take(); len(got) != 1 || got[0] != "" {
		t.Errorf("a plain get asked for versions %q, want the latest only", got)
	}
}

// checkCacheUnready, first on a fresh apiserver: the IPAM's snapshot
// lists the node's affinities from the watch cache, the first request for
// that kind, so the apiserver has only begun to fill the kind's cache and
// refuses the list (429, Retry-After one second). The list is made again
// at the latest at once, not after the wait.
func checkCacheUnready(t *testing.T, c *cluster) {
	b, v := recordedBackend(t, c)
	aff := model.ListOptions{Kind: model.KindBlockAffinity, Node: "node1", Family: 4}
	got, err := b.ReadMany(model.RecentReads(context.Background()), []model.Read{{List: &aff}})
	if err != nil || len(got) != 1 || len(got[0]) != 0 {
		t.Fatalf("recent list of affinities on a fresh apiserver: %v, %v", got, err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.refused) == 0 {
		t.Logf("the apiserver's cache was ready at once (requests %q): nothing to check", v.got)
	}
	for _, i := range v.refused {
		if v.got[i] != "0" || i+1 >= len(v.got) || v.got[i+1] != "" {
			t.Errorf("requests %q, refused %v: want each refused read of the cache made again at the latest", v.got, v.refused)
		}
	}
}

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

// versions records the resourceVersion each request asked for.
type versions struct {
	next http.RoundTripper
	mu   sync.Mutex
	got  []string
}

func (v *versions) RoundTrip(req *http.Request) (*http.Response, error) {
	v.mu.Lock()
	v.got = append(v.got, req.URL.Query().Get("resourceVersion"))
	v.mu.Unlock()
	return v.next.RoundTrip(req)
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
	b := kube.NewWithClient(kc)
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

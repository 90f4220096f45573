package kube_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/kube"
	"github.com/calico-aio/calico-aio/store/model"
)

// barrier holds each request until n are in flight at once (or wait has
// passed) and records the most that were.
type barrier struct {
	next     http.RoundTripper
	n        int
	wait     time.Duration
	mu       sync.Mutex
	inFlight int
	most     int
	all      chan struct{}
}

func (b *barrier) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.inFlight++
	if b.inFlight > b.most {
		b.most = b.inFlight
		if b.most == b.n {
			close(b.all)
		}
	}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.inFlight--
		b.mu.Unlock()
	}()
	select {
	case <-b.all:
	case <-time.After(b.wait):
	}
	return b.next.RoundTrip(req)
}

// checkReadManyConcurrent: ReadMany's reads are in flight together (one
// round trip, not one each), and still give one result per read, in order.
func checkReadManyConcurrent(t *testing.T, c *cluster) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kapi.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	reads := []model.Read{
		{Key: model.Key{Kind: "IPPool", Name: "rm-a"}}, {Key: model.Key{Kind: "IPPool", Name: "rm-b"}},
		{Key: model.Key{Kind: "IPAMConfig", Name: "default"}}, {Key: model.Key{Kind: model.KindIPAMHandle, Name: "k8s-pod-network.rm"}},
		{List: &model.ListOptions{Kind: model.KindBlockAffinity, Node: "rm-node"}},
	}
	bar := &barrier{n: len(reads), wait: 3 * time.Second, all: make(chan struct{})}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { bar.next = rt; return bar })
	kc, err := k8s.NewClientFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := kube.NewWithClient(kc).ReadMany(context.Background(), reads)
	if err != nil || len(got) != len(reads) {
		t.Fatalf("ReadMany = %d results, %v; want %d", len(got), err, len(reads))
	}
	for i, objs := range got {
		if len(objs) != 0 {
			t.Errorf("read %d: %d objects, want none", i, len(objs))
		}
	}
	if bar.most != len(reads) {
		t.Errorf("ReadMany had at most %d requests in flight, want its %d reads at once", bar.most, len(reads))
	}
}
